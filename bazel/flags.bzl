"""A string-valued command-line setting (`--//bazel:NAME=value`) readable from rules."""

FlagInfo = provider(
    doc = "The value a string setting has in this build.",
    fields = {"value": "the string given on the command line, or the default"},
)

def _string_setting_impl(ctx):
    allowed = ctx.attr.values
    if allowed and ctx.build_setting_value not in allowed:
        fail("invalid value '%s' for --%s: expected one of %s" %
             (ctx.build_setting_value, ctx.label, ", ".join(allowed)))
    return [FlagInfo(value = ctx.build_setting_value)]

string_setting = rule(
    implementation = _string_setting_impl,
    build_setting = config.string(flag = True),
    attrs = {"values": attr.string_list(doc = "Allowed values; empty means any.")},
)
