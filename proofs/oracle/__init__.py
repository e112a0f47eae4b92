"""A reference oracle: slow, literal transcriptions of the papers' numbered equations and
rules, written from the specifications (``/work/shared/spec/*.md`` in the project's shared
folder; the pages ``docs/explanation-*.md`` quote them) and the papers, never from
:mod:`mechanisms`' code. Plain Python loops over clients, pairs and subsets, Python floats and
``math``; one module per paper:

* :mod:`proofs.oracle.ipfl`: Zhang et al. 2025 (iPFL): Eq. 4 (gains), Eq. 10 (prices and the
  buyer's problem), Box 2 (thresholds; the selection as printed, and the local rule that skips
  a failure), the exact rule with its documented tie order, Eqs. 12-13 (remittances and
  payments), Eq. 3 (utilities), Eq. 5 (welfare), the baselines' ledger, the reference
  payment rules (VCG with the Clarke pivot, the Shapley split, cost-plus, none), and the
  model distances with Eq. 8's prox-centre.
* :mod:`proofs.oracle.cpl`: Luo et al. 2023 (CPL): the bound coefficient, the aggregation
  weights, the clients' best response, the inverse price, the bound (Thm 1), the spend, the
  equilibrium of Problem P1' and the budget-calibrated posted prices.
* :mod:`proofs.oracle.lia`: Rokvic et al. 2025 (pFedLIA): the lazy influence score, the
  exact 1-D 2-means, the beneficial sets and the two clustering modes.

The oracle is used only to CHECK the mechanisms (the properties ``conforms``,
``cpl_conforms`` and ``lia_conforms`` of :mod:`proofs.conformance` and
:mod:`proofs.lia_properties`), never in their place: nothing outside :mod:`proofs` imports
it, and it imports nothing from :mod:`mechanisms` but the input types it reads.
"""
