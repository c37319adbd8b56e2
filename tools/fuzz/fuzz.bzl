"""libFuzzer targets built with Debian's clang, run for a bounded time by `bazel test`.

Bazel's auto-configured C++ toolchain is gcc, which has no libFuzzer, and one
build cannot mix two auto-configured toolchains. So the fuzz binary is built by
a plain action that calls /usr/bin/clang++ (like tools/proto.bzl calls
/usr/bin/protoc) on the sources of the fuzz target and of every cc_library it
depends on, collected by an aspect: the cc_library targets stay the single list
of sources, and the normal gcc build is untouched. Include paths, defines and
linkopts of the dependencies are carried over; per-target copts are not (they
are gcc-specific tuning). Headers come from the system include path as in the
gcc build (clang on Debian uses the same libstdc++ and /usr/include), so the
dependencies' system libraries (@system//:absl, ...) link as they are.

    load("//tools/fuzz:fuzz.bzl", "cc_fuzz_test")

    cc_fuzz_test(
        name = "safetensors_header_fuzz_test",
        srcs = ["safetensors_header_fuzz.cc"],      # defines LLVMFuzzerTestOneInput
        deps = [":safetensors_format"],
        corpus = glob(["safetensors_header_fuzz_corpus/*"]),
        dict = "safetensors_header_fuzz.dict",      # optional
    )

makes `<name>_bin` (the fuzzer: -fsanitize=fuzzer,address,undefined, UB is
fatal) and the test `<name>`, which runs the seed corpus and then fuzzes for
`max_total_time` seconds (tools/fuzz/run_fuzz_test.sh). Run longer by hand:
`bazel build //pkg:<name>_bin && bazel-bin/pkg/<name>_bin -max_total_time=600 DIR`.
"""

_FuzzSourcesInfo = provider(
    doc = "Sources and link flags of a cc_library and everything it depends on.",
    fields = {
        "srcs": "depset of .cc files",
        "hdrs": "depset of headers (action inputs)",
        "includes": "depset of -I directories from `includes` attributes",
        "defines": "depset of -D values from `defines` attributes",
        "linkopts": "depset of linker flags, dependents before dependencies",
    },
)

def _files(rule, name):
    return getattr(rule.files, name, [])

def _fuzz_sources_aspect_impl(target, ctx):
    rule = ctx.rule
    srcs = [f for f in _files(rule, "srcs") if f.extension in ("cc", "cpp", "cxx", "c")]
    hdrs = [f for f in _files(rule, "srcs") + _files(rule, "hdrs") + _files(rule, "textual_hdrs")
            if f.extension in ("h", "hh", "hpp", "inc")]
    root = target.label.workspace_root
    package = target.label.package
    includes = []
    for inc in getattr(rule.attr, "includes", []):
        path = "/".join([p for p in [root, package, inc] if p])
        includes += [path, ctx.bin_dir.path + "/" + path]
    deps = [d[_FuzzSourcesInfo] for d in getattr(rule.attr, "deps", []) if _FuzzSourcesInfo in d]
    return [_FuzzSourcesInfo(
        srcs = depset(srcs, transitive = [d.srcs for d in deps]),
        hdrs = depset(hdrs, transitive = [d.hdrs for d in deps]),
        includes = depset(includes, transitive = [d.includes for d in deps]),
        defines = depset(getattr(rule.attr, "defines", []), transitive = [d.defines for d in deps]),
        linkopts = depset(
            getattr(rule.attr, "linkopts", []),
            transitive = [d.linkopts for d in deps],
            order = "topological",
        ),
    )]

_fuzz_sources_aspect = aspect(
    implementation = _fuzz_sources_aspect_impl,
    attr_aspects = ["deps"],
)

# -O1 and frame pointers: readable ASan stacks at most of -O2's speed. UBSan
# aborts (-fno-sanitize-recover) so that undefined behaviour is a crash that
# libFuzzer records with its input, not a line in a log.
_CLANG_FLAGS = [
    "-std=c++17",
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=all",
    "-Wall",
    "-Wno-sign-compare",
]

def _clang_fuzz_binary_impl(ctx):
    deps = [d[_FuzzSourcesInfo] for d in ctx.attr.deps]
    srcs = depset(ctx.files.srcs, transitive = [d.srcs for d in deps]).to_list()
    hdrs = depset(ctx.files.hdrs, transitive = [d.hdrs for d in deps])
    includes = depset(transitive = [d.includes for d in deps]).to_list()
    defines = depset(transitive = [d.defines for d in deps]).to_list()
    linkopts = depset(transitive = [d.linkopts for d in deps], order = "topological").to_list()

    # One compile action per source, so that the two cores build in parallel
    # and an edit recompiles one file.
    objects = []
    for src in srcs:
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (
            ctx.label.name,
            src.short_path.replace("../", "external/"),
        ))
        args = ctx.actions.args()
        args.add_all(_CLANG_FLAGS)
        # Workspace-relative includes ("fsdp/checkpoint/x.h"), and generated
        # headers (protobuf's .pb.h) under the bin directory.
        args.add_all(["-iquote", ".", "-iquote", ctx.bin_dir.path])
        args.add_all(includes, before_each = "-I")
        args.add_all(defines, before_each = "-D")
        args.add_all(ctx.attr.copts)
        args.add_all(["-c", src, "-o", obj])
        ctx.actions.run(
            executable = ctx.attr.clang,
            arguments = [args],
            inputs = depset([src], transitive = [hdrs]),
            outputs = [obj],
            mnemonic = "ClangFuzzCompile",
            progress_message = "Compiling %s for fuzzer %s with clang++" % (src.short_path, ctx.label),
            use_default_shell_env = True,
        )
        objects.append(obj)

    out = ctx.actions.declare_file(ctx.label.name)
    args = ctx.actions.args()
    args.add_all(_CLANG_FLAGS)
    args.add_all(objects)
    args.add_all(["-o", out])
    args.add_all(linkopts)
    args.add_all(ctx.attr.linkopts)
    ctx.actions.run(
        executable = ctx.attr.clang,
        arguments = [args],
        inputs = objects,
        outputs = [out],
        mnemonic = "ClangFuzzLink",
        progress_message = "Linking fuzzer %s with clang++" % ctx.label,
        use_default_shell_env = True,
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

clang_fuzz_binary = rule(
    implementation = _clang_fuzz_binary_impl,
    doc = "A libFuzzer binary from `srcs` plus the transitive sources of the cc_library `deps`.",
    executable = True,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cc", ".cpp"], doc = "the fuzz target"),
        "hdrs": attr.label_list(allow_files = [".h"], doc = "headers only the fuzz target uses"),
        "deps": attr.label_list(aspects = [_fuzz_sources_aspect]),
        "copts": attr.string_list(),
        "linkopts": attr.string_list(),
        "clang": attr.string(default = "/usr/bin/clang++"),
    },
)

def cc_fuzz_test(
        name,
        srcs,
        deps = [],
        corpus = [],
        dict = None,
        max_total_time = 20,
        copts = [],
        linkopts = [],
        size = "medium",
        timeout = "short",
        tags = [],
        **kwargs):
    """A libFuzzer target `<name>_bin` and the test `<name>` that fuzzes it for a bounded time.

    Args:
      name: the test's name; the fuzzer binary is `<name>_bin`.
      srcs: the fuzz target (defines LLVMFuzzerTestOneInput) and its own headers.
      deps: cc_library targets whose sources (transitively) are compiled in.
      corpus: seed inputs (files or filegroups), run first; a crash on one fails at once.
      dict: optional libFuzzer dictionary (tokens of the format).
      max_total_time: seconds of fuzzing after the seeds, per test run.
      copts: extra clang++ flags.
      linkopts: extra link flags.
      size: test size.
      timeout: test timeout; keep it above max_total_time plus start-up.
      tags: test tags ("fuzz" is added, so `--test_tag_filters=-fuzz` skips them).
      **kwargs: passed to the sh_test (e.g. visibility).
    """
    clang_fuzz_binary(
        name = name + "_bin",
        srcs = [s for s in srcs if not s.endswith(".h")],
        hdrs = [s for s in srcs if s.endswith(".h")],
        deps = deps,
        copts = copts,
        linkopts = linkopts,
        testonly = True,
    )
    args = [
        "--fuzzer=$(rootpath :%s_bin)" % name,
        "--max_total_time=%d" % max_total_time,
    ]
    data = [":" + name + "_bin"] + corpus
    if dict:
        args.append("--dict=$(rootpath %s)" % dict)
        data.append(dict)
    args += ["$(rootpaths %s)" % c for c in corpus]
    native.sh_test(
        name = name,
        srcs = ["//tools/fuzz:run_fuzz_test.sh"],
        args = args,
        data = data,
        size = size,
        timeout = timeout,
        tags = tags + ["fuzz"],
        **kwargs
    )
