# lit configuration for accel-rewrite's tests (test/rewrite). Paths come from the generated
# lit.site.cfg.py in the build tree; run lit on build/test/rewrite.
import os
import shutil
import sys

import lit.formats

config.name = "accel-rewrite"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".cpp", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.accel_obj_root, "test")
# Only test/rewrite holds lit tests: the other directories are GoogleTest and CMake projects;
# Inputs and utils hold what tests use.
config.excludes = ["runtime", "support", "package", "Inputs", "utils"]


def llvm_tool(name):
    path = os.path.join(config.llvm_tools_dir, name)
    if not os.path.exists(path):
        lit_config.fatal(f"{name} not found in {config.llvm_tools_dir}; install LLVM's "
                         f"test tools (Debian: llvm-{config.llvm_version.split('.')[0]}-tools)")
    return path


accel_rewrite = os.path.join(config.accel_tools_dir, "accel-rewrite")
# With the runtime's include directory, so that a rewrite's second pass (which sees
# <accelerate/accelerate.h>) parses with the flags of the first and shares its preamble.
runtime_include = os.path.join(config.accel_src_root, "runtime", "include")
torch_flags = (["-std=c++17"] + [f"-isystem {d}" for d in config.torch_include_dirs]
               + [f"-I{runtime_include}"])
utils = os.path.join(config.test_source_root, "rewrite", "utils")
# The tool's default flags as a compile_flags.txt (one argument a line), for tests whose files
# the language server opens: it looks for a compilation database in the file's directory and
# above, and the build tree's own (build/compile_commands.json, above every test's %t) would
# lend them the flags of whichever of its files has the most similar name.
torch_compile_flags = os.path.join(config.test_exec_root, "torch_compile_flags.txt")
os.makedirs(config.test_exec_root, exist_ok=True)
with open(torch_compile_flags, "w") as flags_file:
    flags_file.write("\n".join(
        ["-std=c++17"] + [f"-isystem{d}" for d in config.torch_include_dirs]
        + ["-isystem" + os.path.join(config.accel_src_root, "runtime", "include")]) + "\n")
# Substitutions are regular expressions; tool names match as whole words only.
config.substitutions += [
    ("%accel-rewrite", accel_rewrite),
    ("%torch_flags", " ".join(torch_flags)),
    ("%torch_include_dirs", " ".join(config.torch_include_dirs)),
    ("%torch_compile_flags_txt", torch_compile_flags),
    ("%expect-exit", f'"{sys.executable}" "{os.path.join(utils, "expect-exit.py")}"'),
    ("%strip-checks", f'"{sys.executable}" "{os.path.join(utils, "strip-checks.py")}"'),
    ("%lsp-misuse", f'"{sys.executable}" "{os.path.join(utils, "lsp-misuse.py")}"'),
    ("%run-concurrently", f'"{sys.executable}" "{os.path.join(utils, "run-concurrently.py")}"'),
    ("%check-sarif", f'"{sys.executable}" "{os.path.join(utils, "check-sarif.py")}"'),
    ("%python", f'"{sys.executable}"'),
    ("%doc-blocks", f'"{sys.executable}" "{os.path.join(utils, "doc-blocks.py")}"'),
    ("%accel_tools_dir", config.accel_tools_dir),
    ("%accel_obj_root", config.accel_obj_root),
    # lit's shell does not expand $PATH: a PATH with accel's tools first, spelled out.
    ("%path_with_tools", config.accel_tools_dir + os.pathsep + os.environ.get("PATH", "")),
    ("%accel_docs", os.path.join(config.accel_src_root, "docs")),
    ("%accel_src_root", config.accel_src_root),
    ("%accel_tidy_plugin", os.path.join(config.accel_lib_dir, "libAccelTidyModule.so")),
    (r"%clang-tidy(?![\w-])", llvm_tool("clang-tidy")),
    (r"%clang-apply-replacements(?![\w-])", llvm_tool("clang-apply-replacements")),
    ("%runtime_include", runtime_include),
    (r"%clangxx(?![\w-])", llvm_tool("clang++")),
    ("%accel_version", config.accel_version),
    ("%llvm_version", config.llvm_version),
    ("%torch_version", config.torch_version),
    ("%default_resource_dir", config.default_resource_dir),
    (r"(?<![\w/.-])FileCheck(?![\w/.-])", llvm_tool("FileCheck")),
    (r"%not(?![\w-])", llvm_tool("not")),
]

# Every test's accel-rewrite shares one preamble cache in the build tree (never the user's
# ~/.cache): the first test to parse a given include block pays for it, the others reuse it.
# Tests of the cache itself pass their own --cache-dir.
config.environment["XDG_CACHE_HOME"] = os.path.join(config.test_exec_root, "cache-home")

# Tests that parse <torch/torch.h> need the headers the tool was built against.
if config.torch_include_dirs:
    config.available_features.add("torch")

# A rewrite's compile check pre-includes LibTorch's headers precompiled with %torch_flags (the
# engine tests' prelude, built with the tool): 3 s instead of 20. Without it (a build that has
# not made it yet), the check parses them.
if config.torch_pch and os.path.exists(config.torch_pch):
    config.substitutions.append(("%torch_pch", f"-include-pch {config.torch_pch}"))
else:
    config.substitutions.append(("%torch_pch", ""))

# The clang-tidy plugin is built where clang-tidy's headers are installed (tool/CMakeLists.txt).
if os.path.exists(os.path.join(config.accel_lib_dir, "libAccelTidyModule.so")):
    config.available_features.add("clang-tidy-plugin")

# Neovim (Debian's neovim) drives the language server in lsp.test.
if shutil.which("nvim"):
    config.available_features.add("neovim")
    config.substitutions.append(("%nvim", shutil.which("nvim")))

# The kernel gives transparent huge pages on request only: accel-rewrite requests them for its
# heap (tool/HeapSetup.h).
try:
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as thp:
        if "[madvise]" in thp.read():
            config.available_features.add("thp-madvise")
except OSError:
    pass

# strace (Debian's strace) shows that outputs reach the disk before they are renamed into place.
if shutil.which("strace"):
    config.available_features.add("strace")
    config.substitutions.append(("%strace", shutil.which("strace")))
