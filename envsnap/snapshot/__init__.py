"""The snapshot document: its typed shape, digests, the store of labelled files, masking."""
