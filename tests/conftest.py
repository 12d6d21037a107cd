"""The suite is hermetic: `model.pretrained=auto` looks only in the torch cache (`AEL_OFFLINE`), so no test reaches for
the internet; tests/test_pretrained.py serves its weights on loopback and lifts the switch itself."""
import os

os.environ.setdefault('AEL_OFFLINE', '1')
