"""The designed payment rule 'clipped search' (parameters in clipped.json)."""
from pathlib import Path

from sims.design import load_rule

payments = load_rule(Path(__file__).with_suffix('.json'))
