from proofs.profiles import load_profile

load_profile()  # dev / ci / nightly ship with the package (proofs/profiles.py)
