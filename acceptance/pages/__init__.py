"""What the engagement pages show, computed so the templates only loop and branch: one module
per page (``dashboard``, ``engagement``, ``portal``), with what they share — the timeline drawing,
a gate's standing in a sentence (``sentences``), and the words and formats (``words``)."""
