"""The kernel-enforced script sandbox: one throwaway Docker container per ``run_script`` (see ``docker.py``)."""
