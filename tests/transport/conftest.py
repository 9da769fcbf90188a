from tests.transport.sshd import sshd  # noqa: F401 (fixture)
