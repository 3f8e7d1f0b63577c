"""The embedded lab: its controller-side helpers (``control``, the CLI the ``lab`` role calls, over ``layout``,
``addressing``, ``commands``, ``preflight``, ``processes``, ``lab_files`` and ``status``), the hardware daemons that
emulate the direct link and the GPUs (``link_daemon``, ``gpu_daemon``, their shared shape in ``daemon``), and the lab
inference server (``server``) that stands in for SGLang on the lab's hosts."""
