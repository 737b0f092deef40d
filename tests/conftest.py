"""Shared test configuration: the quick tier.

``python -m pytest -q`` (what CI runs) runs everything but the ``slow`` tests, in two processes
(pytest-xdist). ``python -m pytest -m quick`` is the contributors' tier: every test except the
slow ones and the heavy ones listed below (end-to-end runs, subprocess start-ups, examples,
training, full episodes of the big scenarios: each over a second of CPU). Its budget is README's
figure, which ``benchmarks/quick_tier.py`` measures (CPU seconds, and the slowest tests) and
enforces; under ``-m quick`` the hooks below list every test over :data:`QUICK_TEST_BUDGET_S`.
Run the full suite before you push: the quick tier leaves out what the heavy tests guard.
"""
from __future__ import annotations

import json
import os
import resource

import pytest

#: A quick test's budget in CPU seconds (its process and the subprocesses it waited for, from its
#: setup to its teardown). Under ``-m quick`` a section lists the tests over it: move them into HEAVY.
QUICK_TEST_BUDGET_S = 1.0
#: When set, the CPU seconds of every test that ran are written to this file (JSON, node id -> s):
#: benchmarks/quick_tier.py reads them.
TIMES_ENV = "CLUSTER_BENCH_TEST_TIMES"

#: Tests left out of the quick tier: ``file.py`` (the whole file), ``file.py::test_name`` (every
#: parametrisation) or ``file.py::test_name[id]`` (one), relative to tests/.
HEAVY = frozenset({
    "test_benchmark_discriminates.py::test_size_aware_order_and_placement_beat_fifo_on_philly_hetero_v4",
    "test_scenarios_v3.py::test_the_yardstick_waits_at_least_the_promised_share_over_thirty_test_windows",
    "test_priority_resume.py::test_ray_backend_trains_the_same_weights_as_one_process",
    "test_optimality_bound.py::test_no_compiled_policy_scores_below_the_bound",
    "test_optimality_bound.py::test_no_api_policy_scores_below_the_bound_small_windows",
    "test_optimality_bound.py::test_the_shipped_agents_do_not_score_below_the_bound_on_full_windows",
    "test_optimality_certificate.py::test_every_shipped_certificate_replays_to_its_value_in_the_compiled_engine",
    "test_optimality_certificate.py::test_a_shipped_certificate_replays_bit_for_bit_on_both_paths_and_verify_says_so",
    "test_optimality_certificate.py::test_verify_fails_a_claim_one_ulp_off_or_on_another_window",
    "test_optimality_certificate.py::test_a_better_verified_schedule_updates_the_table_and_a_false_one_is_refused",
    "test_optimality_certificate.py::test_the_shipped_lower_bounds_are_what_the_bound_computes",
    "test_optimality_data.py::test_verify_and_submit_of_a_module_or_model_file_name_run_and_load_nothing",
    "test_optimality_data.py::test_of_concurrent_submits_the_best_stays_and_table_and_certificate_agree",
    "test_optimality_data.py::test_a_teacher_cache_is_checked_and_replayed_before_it_teaches",
    "test_base_install.py",
    "test_baselines_harness.py::test_checked_in_baseline_scores_have_not_moved",
    "test_baselines_harness.py::test_cluster_bench_run_writes_table_files_and_plots",
    "test_baselines_harness.py::test_evaluate_accepts_any_object_with_the_policy_methods",
    "test_baselines_harness.py::test_evaluate_returns_one_record_per_seed_with_every_metric",
    "test_baselines_harness.py::test_ray_backend_on_a_local_instance",
    "test_benchmarks_smoke.py::test_calibrate_load_smoke",
    "test_benchmarks_smoke.py::test_compiled_engine_benchmark_floor_agrees",
    "test_benchmarks_smoke.py::test_effects_decomposition_smoke",
    "test_benchmarks_smoke.py::test_episode_digests_save_then_check",
    "test_benchmarks_smoke.py::test_headroom_smoke",
    "test_benchmarks_smoke.py::test_headroom_optimality_smoke",
    "test_benchmarks_smoke.py::test_optimality_benchmarks_smoke",
    "test_benchmarks_smoke.py::test_replay_benchmark_smoke",
    "test_benchmarks_smoke.py::test_suite_quick_reports_every_section",
    "test_benchmarks_smoke.py::test_workload_csv_cache_benchmark_smoke",
    "test_cli_errors.py::test_module_attribute_policies_resolve_from_the_current_folder",
    "test_custom_trace_cli.py::test_a_users_workload_is_parsed_once_per_process",
    "test_docs.py::test_python_examples_in_docs_run",
    "test_dual_agent.py::test_agent_never_touches_a_job_twice_in_one_instant",
    "test_dual_agent.py::test_cli_train_smoke_then_score_the_checkpoint",
    "test_dual_agent.py::test_subprocess_and_in_process_rollouts_agree",
    "test_dual_agent_prior.py::test_config_and_cli_errors_name_the_argument",
    "test_dual_agent_prior.py::test_paired_script_against_every_info_agnostic_heuristic",
    "test_dual_agent_prior.py::test_prior_margin_script_smoke",
    "test_dual_agent_prior.py::test_training_loss_sees_the_bonus_and_one_rloo_iteration_moves_the_output_layers",
    "test_dual_agent_prior.py::test_untrained_residual_agent_is_exactly_its_heuristic",
    "test_dual_agent_rloo.py::test_batched_rollout_benchmark_smoke",
    "test_dual_agent_rloo.py::test_batched_rollout_of_one_env_matches_the_one_env_path",
    "test_dual_agent_rloo.py::test_cli_rloo_smoke_then_score_the_checkpoint",
    "test_dual_agent_rloo.py::test_paired_evaluation_script_smoke",
    "test_dual_agent_rloo.py::test_rloo_groups_share_their_window_and_training_is_deterministic",
    "test_dual_agent_rwgp.py::test_real_environment",
    "test_dual_inference.py::test_gp_solve_by_lapack_equals_scipy_wrappers",
    "test_dual_portable.py::test_checked_in_dual_scores_survive_last_bit_noise_and_catch_a_real_change",
    "test_dual_portable.py::test_compiled_kernels_give_the_bits_of_their_python_versions",
    "test_dual_priority.py::test_a_learned_weight_changes_the_schedule_and_reads_as_documented",
    "test_dual_priority_migrate.py::test_learned_weights_with_migrate_keep_api_compiled_parity",
    "test_dual_priority_migrate.py::test_the_untrained_migrating_agent_moves_the_hand_worked_job",
    "test_dual_priority_migrate.py::test_zero_weights_with_migrate_are_las_migrate_record_for_record",
    "test_dual_priority.py::test_ablation_table_script_pairs_variants_with_the_reference_and_the_first",
    "test_dual_priority.py::test_cli_smoke_then_score_the_agent_by_path",
    "test_dual_priority.py::test_compiled_tenant_statistics_change_the_schedule_as_the_api_does",
    "test_dual_priority.py::test_compiled_weighted_las_plays_the_api_agent_record_for_record",
    "test_dual_priority.py::test_paired_evaluation_script_reads_a_priority_agent",
    "test_dual_priority.py::test_residual_placer_moves_placements_and_the_compiled_engine_follows",
    "test_dual_priority.py::test_the_shipped_hetero_agent_is_a_default_of_cluster_bench_run_and_plays_compiled",
    "test_dual_validation.py::test_matched_windows_are_computed_where_none_ship",
    "test_dual_validation.py::test_shipped_windows_look_like_test_and_say_what_las_measures",
    "test_dual_validation.py::test_the_paper_trainer_validates_on_the_matched_windows",
    "test_dual_validation.py::test_train_ends_with_a_paired_test_report_that_flags_fewer_than_100_windows",
    "test_env_api.py::test_same_seed_same_trajectory_other_seed_other_fluctuation",
    "test_event_paths.py::test_compiled_launch_release_and_stamps_match_numpy",
    "test_event_paths.py::test_compiled_skip_idle_loop_matches_numpy",
    "test_event_paths.py::test_measurement_kept_where_an_effect_needs_it",
    "test_examples.py::test_train_dual_agent_tiny_budget",
    "test_examples.py::test_train_maskable_ppo_tiny_budget",
    "test_examples_baselines.py::test_02_compare_baselines",
    "test_examples_baselines.py::test_05_custom_trace_and_cluster",
    "test_examples_baselines.py::test_05_reports_bad_rows_with_file_row_and_field",
    "test_examples_baselines.py::test_06_render_timeline",
    "test_examples_baselines.py::test_07_custom_heuristic",
    "test_examples_rl_path.py::test_cleanrl_ppo_parallel_tiny_budget",
    "test_flat_view_policy.py::test_adapter_reproduces_the_flat_view_episode",
    "test_fresh_clone.py::test_pytest_collects_a_file_importing_tests_helpers",
    "test_fluctuation_calibration.py::test_calibration_is_sensitive_to_the_parameters",
    "test_gittins.py::test_gittins_on_a_users_workload_is_refused_on_every_path",
    "test_invariants.py::test_invariants_hold_after_every_step",
    "test_kernels.py::test_environment_variable_selects_backend_and_rejects_typos",
    "test_kernels.py::test_machine_pool_compaction_keeps_results",
    "test_kernels.py::test_numba_and_numpy_kernels_give_identical_episodes",
    "test_kernels.py::test_warm_up_loads_one_specialisation_per_kernel",
    "test_las_migrate.py::test_compiled_las_migrate_equals_the_api_on_hetero_windows",
    "test_las_migrate.py::test_extended_v2_only_appends_columns_and_stays_in_its_spaces",
    "test_layering.py::test_cluster_env_imports_no_policy_package",
    "test_layering.py::test_the_baselines_cli_does_not_import_the_dual_agent_cli",
    "test_loader_errors.py::test_any_text_loads_or_raises_data_error",
    "test_loader_fuzz.py::test_one_bad_cluster_cell_is_named_by_row_and_field",
    "test_loader_fuzz.py::test_one_bad_workload_cell_is_named_by_row_and_field",
    "test_loaders.py::test_philly_job_types_follow_the_seeded_rule",
    "test_loaders.py::test_philly_trace_matches_the_raw_file",
    "test_long_run.py::test_no_file_descriptor_growth_over_30_episodes",
    "test_long_run.py::test_python_heap_stays_flat_over_60_episodes",
    "test_long_run.py::test_same_seed_same_metrics_in_fresh_processes_with_other_hash_seeds",
    "test_long_run.py::test_stability_benchmark_runs_with_a_tiny_budget",
    "test_main_job.py::test_bare_cluster_bench_run",
    "test_model_trust.py::test_a_payload_the_policy_needs_runs_only_with_the_trust_flag",
    "test_model_trust.py::test_a_saved_agent_loads_without_trust_and_scores_as_sb3s_own_load",
    "test_model_trust.py::test_a_torchscript_module_needs_the_trust_flag_also_in_worker_processes",
    "test_model_trust.py::test_the_environment_variable_trusts_with_the_flags_warning_once",
    "test_no_stall.py::test_lowest_allowed_action_with_preemption_ends",
    "test_npy_loops.py::test_disabled_by_environment_variable",
    "test_observation_ext.py::test_tenant_statistics_read_only_jobs_finished_before_now",
    "test_properties.py::test_invariants_random_instances_switches_and_policies",
    "test_reliability.py::test_a_full_cache_disk_turns_caching_off_with_one_warning",
    "test_reliability.py::test_ctrl_c_during_run_writes_what_finished_and_exits_130",
    "test_reliability.py::test_second_process_loads_every_kernel_from_the_cache",
    "test_reliability.py::test_workers_die_with_their_parent",
    "test_runs_kept.py::test_a_checkpoint_whose_config_is_a_string_is_named_by_file_and_field",
    "test_runs_kept.py::test_a_damaged_training_checkpoint_is_named_by_file_and_field",
    "test_runs_kept.py::test_ctrl_c_inside_a_compiled_kernel_of_train_is_one_line_and_130",
    "test_runs_kept.py::test_train_keeps_a_finished_run_unless_overwritten",
    "test_safe_defaults.py::test_plain_ppo_benchmark_smoke",
    "test_safe_defaults.py::test_registered_views_pass_both_checkers_with_default_arguments",
    "test_supersuit.py::test_defaults_are_the_views_rule_and_pass_the_pettingzoo_seed_test",
    "test_supersuit.py::test_plain_ppo_trains_on_the_default_supersuit_env",
    "test_vector.py::test_benchmark_script_smoke",
    # Over a second of CPU each (benchmarks/quick_tier.py lists them): training, subprocesses, whole runs.
    "test_baselines_harness.py::test_run_records_only_the_first_seed_and_every_episode_brings_its_jcts",
    "test_baselines_policies.py::test_every_policy_completes_every_scenario_with_invariants",
    "test_compiled_engine.py::test_gittins_identical_through_preemptions_and_promotions",
    "test_dual_agent.py::test_resume_continues_exactly_as_the_uninterrupted_run",
    "test_dual_agent.py::test_training_changes_only_the_learned_halves",
    "test_dual_agent_dagger.py::test_cli_trains_from_hindsight_teachers",
    "test_dual_agent_dagger.py::test_fine_tuning_starts_from_the_imitation_weights_deterministically",
    "test_dual_agent_dagger.py::test_residual_start_on_las_migrate_learns_the_teacher_too",
    "test_dual_agent_dagger.py::test_student_learns_the_teacher_of_a_tiny_window",
    "test_dual_agent_dagger.py::test_worker_processes_give_the_in_process_weights",
    "test_dual_portable.py::test_branch_free_tanh_has_the_bits_of_the_branchy_one",
    "test_examples.py::test_quickstart_random_agent_prints_the_metrics",
    "test_las_migrate.py::test_the_vectorised_placement_columns_equal_the_per_row_reference_bit_for_bit",
    "test_objectives.py::test_cluster_bench_run_scores_the_objective_baselines_and_shows_their_metrics",
    "test_output_files.py::test_a_second_ctrl_c_while_writing_partial_results_waits_for_them",
    "test_priority_objective.py::test_two_iteration_objective_training_is_the_same_for_the_same_seed_on_both_engines",
    "test_reliability.py::test_a_crash_between_log_row_and_checkpoint_does_not_duplicate_an_iteration",
    "test_reliability.py::test_a_full_disk_while_saving_a_checkpoint_says_so",
    "test_results_kept.py::test_an_episode_that_raises_on_the_process_backend_keeps_every_finished_episode",
    "test_rllib.py::test_example_09_tiny_run_prints_a_paired_table",
    "test_rllib.py::test_two_rllib_policies_train_and_score_in_the_harness",
    "test_run_outputs.py::test_a_real_runs_default_table_fits_a_terminal_and_the_files_keep_every_column",
    "test_run_outputs.py::test_a_run_says_what_it_writes_and_every_plot_draws_a_policy_in_one_colour",
    "test_safe_defaults.py::test_plain_ppo_trains_on_the_flat_view_with_defaults",
    "test_trained_agents.py::test_a_model_trained_through_supersuit_is_scored",
    "test_update_packing.py::test_packed_update_gives_the_padded_numbers_and_gradients",
    "test_dual_agent_rloo.py::test_rloo_with_the_critic_baseline_trains_the_critic",
    "test_flat_view_policy.py::test_from_sb3_scores_a_maskable_ppo_model",
    "test_quick_tier.py::test_the_benchmark_measures_a_tier_and_fails_above_its_budget",
    "test_dual_agent_rloo.py::test_imitation_warm_start_from_las_in_batched_rollouts",
    "test_results_kept.py::test_an_interrupted_rerun_keeps_the_previous_complete_results",
    "test_supersuit.py::test_supersuit_vector_wrappers_and_maskable_ppo",
    "test_vector_sb3.py::test_maskable_ppo_trains_on_the_adapter",
    "test_dual_agent_rloo.py::test_extended_observation_is_recorded_and_applied_by_the_harness",
    "test_properties.py::test_same_seed_same_whole_trajectory",
    "test_paired_stats.py::test_cluster_bench_run_shows_ratios_and_writes_the_paired_plot",
    "test_dual_portable_rows.py::test_padding_rows_and_unchanged_machines_are_computed_once_with_the_same_bits",
    "test_compiled_engine.py::test_named_baselines_identical_to_api[gittins-philly-hetero-v1]",
    "test_baselines_las_oracle.py::test_composes_with_every_placer",
    "test_trained_agents.py::test_a_model_trained_on_the_default_view_scores_in_one_line",
    "test_model_trust.py::test_a_bare_sb3_save_with_a_custom_network_loads_without_trust",
    "test_quick_tier.py::test_heavy_parametrisations_are_cases_that_pytest_collects",
    "test_wrappers.py::test_maskable_ppo_learns_on_vec_envs",
    "test_model_trust.py::test_a_payload_in_a_field_the_loader_does_not_need_is_never_unpickled",
    "test_resolve_once.py::test_cluster_bench_run_resolves_each_policy_once",
    "test_resolve_once.py::test_one_object_over_many_episodes_plays_as_fresh_ones",
})


def _heavy(nodeid: str) -> bool:
    path, _, rest = nodeid.partition("::")
    name = path.rsplit("/", 1)[-1]
    return name in HEAVY or f"{name}::{rest.split('[', 1)[0]}" in HEAVY or f"{name}::{rest}" in HEAVY


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None and not _heavy(item.nodeid):
            item.add_marker(pytest.mark.quick)


@pytest.fixture(scope="module")
def torch():
    """torch with one thread, for tests that train or load SB3 models (skipped without the rl extra)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("sb3_contrib")
    torch.set_num_threads(1)
    return torch


_START = pytest.StashKey[float]()
#: CPU seconds per test node id, gathered where the reports arrive (the xdist controller too).
_TIMES: dict[str, float] = {}


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that were waited for, user and system."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_START] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown" and _START in item.stash:      # travels with the report (xdist too)
        report.user_properties.append(("cpu_s", _cpu_seconds() - item.stash[_START]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "teardown":
        cpu = dict(report.user_properties).get("cpu_s")
        if cpu is not None:
            _TIMES[report.nodeid] = float(cpu)


def _quick_selected(config: pytest.Config) -> bool:
    expr = " ".join(str(config.getoption("markexpr", "") or "").split())
    return "quick" in expr and "not quick" not in expr


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under ``-m quick``, where the collected tests imported torch: load what torch loads on its
    first optimizer step (torch._dynamo, about a CPU second) now, as the start-up it is, not in
    whichever test trains first."""
    import sys

    if _quick_selected(session.config) and "torch" in sys.modules and session.items:
        try:
            import torch._dynamo  # noqa: F401
        except Exception:          # pragma: no cover - a torch without it: nothing to load
            pass


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Under ``-m quick``: the quick tests over :data:`QUICK_TEST_BUDGET_S` (CPU), slowest first."""
    path = os.environ.get(TIMES_ENV)
    if path and not hasattr(config, "workerinput"):
        with open(path, "w") as f:
            json.dump(_TIMES, f, indent=0, sort_keys=True)
    if not _quick_selected(config):
        return
    over = sorted(((s, n) for n, s in _TIMES.items() if s > QUICK_TEST_BUDGET_S), reverse=True)
    if not over:
        return
    terminalreporter.write_sep("=", f"{len(over)} quick test(s) over the {QUICK_TEST_BUDGET_S:g} s budget "
                                    "(CPU seconds)", yellow=True, bold=True)
    for seconds, nodeid in over:
        terminalreporter.write_line(f"{seconds:7.2f} s  {nodeid}")
    terminalreporter.write_line("the quick tier keeps each test under the budget: list these in HEAVY "
                                "(tests/conftest.py) or make them cheaper; benchmarks/quick_tier.py measures "
                                "the whole tier")
