"""The transformers reference engine (its threads wait passively: `kvgate/__init__.py` says why)."""
