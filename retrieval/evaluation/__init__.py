"""The tools that measure the core: metrics, the paired significance test, ``eval`` (per configuration and
category), sweeps, the ablation, ``bench`` and the seeded ``lab``.

They import the core (``retrieval.pipeline``, ``retrieval.settings``, ...); the core never imports them.
"""
