"""The failures room: which sandbox rule a failed command or cell ran into (the notes)."""
