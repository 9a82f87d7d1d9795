"""The programs the two sides run, each a separate process in its namespace::

    python -m tcplab.traffic.programs.<name> '<json configuration>'

Each prints one JSON report (:class:`~.harness.SideReport`) on stdout when it ends, also
when it is stopped by SIGTERM (a timeout), so a partial run still says how far it got.
They import nothing heavy: they start in a few tens of milliseconds.
"""
