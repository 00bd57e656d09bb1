# Megatron-LM's flag vocabulary and `--config FILE` (docs/megatron-flags.md):
# each alias and each flag of another shape against its native spelling, and
# the canonical config file's round trip, precedence and refusals.
rc_add_sh_test(flags_megatron flags_megatron.sh)
rc_add_sh_test(flags_config flags_config.sh)
