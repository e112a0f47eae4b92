"""Scenarios, comparisons, the ``fedmarket`` command and plots.

:mod:`sims.inclusive` runs the paper's inclusive market (Fig. 5) at the mechanism level;
:mod:`sims.plots` draws; :mod:`sims.cli` is the command line (one module per command).
"""
