"""The simulator as compiled functions over state arrays, shared by the compiled engines.

* :mod:`~cluster_env.core.engine.layout`: row and slot indices of the state arrays;
* :mod:`~cluster_env.core.engine.state`: ``build_state(env, sim)``, the arrays of a fresh episode;
* :mod:`~cluster_env.core.engine.sim`: the dynamics (numba; imported only where numba is);
* :mod:`~cluster_env.core.engine.ref`: the state tuple passed by reference to the compiled
  functions (one pointer, no per-call copies or reference counts; numba).

Users: the batched vector env's compiled backend (:mod:`cluster_env.vector.compiled`) and the
compiled baselines (:mod:`baselines.engine`, which adds decision rules on top).
"""
