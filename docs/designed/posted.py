"""The designed mechanism 'posted' (parameters in posted.json):
its selection rule, prices and payments."""
from pathlib import Path

from sims.design import load_rule

mechanism = load_rule(Path(__file__).with_suffix('.json'))
rule, prices, payments = mechanism.rule, mechanism.prices, mechanism.payments
