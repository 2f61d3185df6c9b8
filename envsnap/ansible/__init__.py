"""The Ansible collection envsnap.gpu: its source (collection/), the step that assembles it
with the agent (build.py), and the controller code its action plugins call (controller.py)."""
