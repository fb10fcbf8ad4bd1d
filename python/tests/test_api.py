"""The mirror of include/nncl.h: every public function is declared and wrapped, every struct
has the C layout, every enum the C values."""
import ctypes
import os
import re
import subprocess

import nncl
from nncl import _errors, _lib, data, graph, progress, trainer
from conftest import HERE, TOP

HEADER = open(os.path.join(TOP, "include", "nncl.h")).read()
PKG = os.path.join(os.path.dirname(HERE), "nncl")


def header_functions():
    return sorted(set(re.findall(r"^NNCL_API\s[^;]*?\b(nncl_\w+)\s*\(", HEADER, re.M)))


def test_every_header_function_is_declared():
    builders = {spec[1] for spec in graph.BUILDERS}
    missing = [f for f in header_functions() if f not in _lib.PROTOS and f not in builders]
    assert not missing, "not declared in nncl/_lib.py PROTOS nor graph.BUILDERS: %s" % missing
    assert len(header_functions()) > 150


def test_every_header_function_is_called_by_the_package():
    src = ""
    for f in os.listdir(PKG):
        if f.endswith(".py") and f != "_lib.py":
            src += open(os.path.join(PKG, f)).read()
    unused = [f for f in header_functions() if not re.search(r"\b%s\b" % f, src)]
    # the *_default functions are called by _lib-using modules too; none may be left out
    assert not unused, "declared but never called: %s" % unused


def test_struct_layouts_match_the_header(cc, tmp_path):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "nncl.h"', "int main(void) {"]
    for cname, st in _lib.STRUCTS.items():
        lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _ in st._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, field, cname, field))
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    out = subprocess.run([cc(str(src), "layout")], capture_output=True, text=True, check=True).stdout
    want = {}
    for line in out.splitlines():
        s, f, v = line.split()
        want[(s, f)] = int(v)
    for cname, st in _lib.STRUCTS.items():
        assert ctypes.sizeof(st) == want[(cname, "sizeof")], cname
        for field, _ in st._fields_:
            assert getattr(st, field).offset == want[(cname, field)], "%s.%s" % (cname, field)


def test_enums_match_the_header(cc, tmp_path):
    tables = {
        "NNCL_ACT_": {k.upper(): v for k, v in graph.ACTS.items() if k},
        "NNCL_BN_ACT_": {k.upper(): v for k, v in graph.BN_ACTS.items() if k},
        "NNCL_INIT_": {k.upper(): v for k, v in graph.INITS.items()},
        "NNCL_OPT_": {k.upper(): v for k, v in trainer.OPTIMIZERS.items()},
        "NNCL_SCHED_": {k.upper(): v for k, v in trainer.SCHEDULES.items()},
        "NNCL_PRECISION_": {k.upper(): v for k, v in trainer.PRECISIONS.items()},
        "NNCL_PROGRESS_": {k.upper(): v for k, v in progress.MODES.items()},
        "NNCL_CSV_LABELS_": {k.upper(): v for k, v in data.LABEL_MODES.items()},
        "NNCL_LOG_": {k.upper(): v for k, v in nncl._core.LOG_LEVELS.items()},
        "NNCL_DEVICE_": {v.upper(): k for k, v in nncl._core.DEVICE_TYPES.items()},
    }
    names = [(p + k, v) for p, t in tables.items() for k, v in t.items()]
    statuses = re.findall(r"^\s*(NNCL_ERR_\w+) = (-\d+)", HEADER, re.M)
    assert len(statuses) == 12
    for name, value in statuses:
        cls = _errors.BY_STATUS[int(value)]
        assert cls.status == int(value)
        names.append((name, int(value)))
    src = tmp_path / "enums.c"
    src.write_text('#include <stdio.h>\n#include "nncl.h"\nint main(void) {\n' +
                   "".join('printf("%%d\\n", (int)%s);\n' % n for n, _ in names) + "return 0;\n}\n")
    out = subprocess.run([cc(str(src), "enums")], capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in out] == [v for _, v in names]
    # one exception class per status, each raised for its own code
    assert sorted(_errors.BY_STATUS) == sorted(int(v) for _, v in statuses)


def test_devices_list(ctx):
    devs = nncl.devices()
    assert devs and all(isinstance(d, nncl.DeviceInfo) for d in devs)
    assert [d.index for d in devs] == list(range(len(devs)))
    mine = ctx.devices
    assert len(mine) == ctx.device_count >= 1
    assert mine[0].name in [d.name for d in devs]
    assert mine[0].type in ("cpu", "gpu", "accelerator", "other") and mine[0].global_mem > 0


def test_main_prints_the_devices():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    out = subprocess.run([os.sys.executable, "-m", "nncl"], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith("libnncl: ") and "device 0: " in out
