"""The paper's agent (KDD 2023): two torch networks trained jointly on one shared reward.

A room of its own; every module but :mod:`~dual_agent.paper.config`, :mod:`~dual_agent.paper.prior`,
:mod:`~dual_agent.paper.rwgp` and :mod:`~dual_agent.paper.portable` needs torch (``pip install
'.[rl]'``). Importing this package imports nothing; the documented names are ``dual_agent``'s
(``from dual_agent import DualAgentPolicy``).

* the agent: :mod:`~dual_agent.paper.networks` (squeeze-and-communicate orderer, RWGP-fed placer,
  central critic), :mod:`~dual_agent.paper.rwgp` (the placer's Random Walk GP),
  :mod:`~dual_agent.paper.config` (architecture and training settings),
  :mod:`~dual_agent.paper.prior` (residual form on a heuristic);
* acting: :mod:`~dual_agent.paper.policy` (the agent as a policy),
  :mod:`~dual_agent.paper.inference` (module-free forward passes),
  :mod:`~dual_agent.paper.portable` (float64 logits, the same bits on every CPU),
  :mod:`~dual_agent.paper.checkpoint` (the ``.pt`` file);
* training: :mod:`~dual_agent.paper.mappo` (MAPPO), :mod:`~dual_agent.paper.rloo` (same-window
  groups), :mod:`~dual_agent.paper.rollout` (worker processes),
  :mod:`~dual_agent.paper.batched` (lock-step batched rollouts),
  :mod:`~dual_agent.paper.cli` (``cluster-bench train``).

Imports go one way (networks, config, prior, rwgp -> inference, portable, checkpoint -> policy ->
rollout, batched -> mappo -> rloo -> cli); ``tests/test_layering.py`` refuses an import circle.
"""
