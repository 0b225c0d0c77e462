"""Drop-in reward functions for the trainers people already run: verl, TRL (and open-r1 data), over rewardbox."""
