"""The lab: a real SSH node on loopback with stand-in hardware tools (simulated evidence)."""
