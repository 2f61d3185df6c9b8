"""Pasted tool outputs (collect_env, check_env, nvidia-smi, pip) read into one snapshot."""
