# run.cmake — tests of `resumecheck run` (harness/run*.c, report*.c,
# plot_svg.c, exec_template.c, src/cli/cmd_run.c). Unit tests plan and
# judge runs without training; shell tests drive fake exec trainers
# (tests/trainers/) and, for the seed's table, the real CPU core.
rc_add_c_test(run_template test_run_template.c)
rc_add_c_test(run_plan test_run_plan.c)
rc_add_c_test(run_report test_run_report.c)

foreach(t run_exec_good run_exec_forget run_exec_nondet run_exec_horizon run_exec_crash run_exec_paths
          run_exec_interrupt run_usage run_seed_legacy run_seed_resolve run_seed_fusion_off
          run_seed_confirm run_prewarm run_prewarm_dies run_census run_handoff run_checkpoint_format)
  rc_add_sh_test(${t} ${t}.sh)
endforeach()
rc_add_sh_test(run_jobs_memory run_jobs_memory.sh)
# --device cuda: the free memory through NVML, no CUDA context (a stand-in NVML)
rc_add_sh_test(nvml_probe nvml_probe.sh)
# the Markdown summary under GFM: a trainer's hostile file name, shown verbatim
rc_add_sh_test(run_md_escape run_md_escape.sh)
# --save-at auto: the points chosen and why, the fp16 probe (docs/design.md §6)
rc_add_sh_test(run_save_auto run_save_auto.sh)
# critical-first GPU scheduling (docs/robustness.md): `train --step-lock`
# itself, then `run --gpu-scheduling` on the CPU core
rc_add_sh_test(leg_step_lock leg_step_lock.sh)
rc_add_sh_test(run_gpu_scheduling run_gpu_scheduling.sh)
# state checks compared while later legs run, the same verdict as after them
rc_add_sh_test(run_early_checks run_early_checks.sh)
# the start gate of critical-first: `train --start-gate` waits while run holds it
rc_add_sh_test(leg_start_gate leg_start_gate.sh)
# --through-checkpoints hashes: the through leg keeps hashes only at K
# (docs/checkpoint-format.md); every verdict as with full shards
rc_add_sh_test(run_through_hashes run_through_hashes.sh)
# --through-checkpoints on-demand: through@N written only when a check at N
# differs (harness/run_deferred.c, `train --save-deferred-at`)
rc_add_sh_test(run_through_on_demand run_through_on_demand.sh)
