"""Running a playbook: ansible-runner, the strategy, the progress lines and a cancel."""
