"""A kernel's records as a Jupyter notebook (nbformat 4): the person's artifact of a session."""
