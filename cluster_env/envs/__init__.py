"""The environment face: the PettingZoo parallel env, its observations and its rendering."""
