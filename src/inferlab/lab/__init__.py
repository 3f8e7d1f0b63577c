"""The embedded lab: its controller-side helpers (``control``), the hardware daemons that emulate the direct link and
the GPUs (``link_daemon``, ``gpu_daemon``, their shared shape in ``daemon``), and the lab inference server
(``server``) that stands in for SGLang on the lab's hosts."""
