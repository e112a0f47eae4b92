"""The PyTorch federated learner that plugs into :mod:`mechanisms` (issue: the federated
learner). Nothing here yet: the mechanism-level scenarios in :mod:`sims` use synthetic model
parameters until it lands."""
