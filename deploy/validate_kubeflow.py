#!/usr/bin/python3
"""Checks the Kubeflow Pipelines files of deploy/kubeflow offline (called by deploy/validate.sh).

    validate_kubeflow.py --repo ROOT --kubeflow DIR RENDER=FILE...

There is no KFP SDK here (kfp is on PyPI only), so this script reads the files as the SDK would
and checks what can be checked without it:

  * every *.component.yaml is a KFP component in the YAML format kfp.components.
    load_component_from_file reads (name, description, inputs, outputs,
    implementation.container{image, command, args}): known keys only, input and output names
    unique and valid, parameter types, `default` a string and only with `optional` semantics,
    every placeholder ({inputValue}, {outputPath}, {if: {cond: {isPresent}}}, {concat})
    referring to a declared input or output, every input and output used;
  * the container runs `granary <command>` — directly or as the one `granary` line of an
    `sh -ec` script whose positional parameters are the leading args — and, for every
    combination of present/absent optional inputs, its command line holds only flags that
    command accepts (tools/commands.cc) and the binary defines (ABSL_FLAG), each once, each
    valued flag with a value, the required ones (--dispatcher, --pipeline), and either
    --insecure or all of --tls_cert/--tls_key/--tls_ca (never both); a `granary run` step's
    --cache_policy is at_mark exactly when its at_mark input is present (else full);
  * the image is the Granary image the rendered overlays run; the default dispatcher address
    is a Service port of the rendered deployment;
  * every *.pipeline.yaml is a KFP pipeline in the IR (PipelineSpec) the KFP backend runs:
    its components and executors are exactly what the component files compile to; every task
    refers to an existing component, gives each required input, takes parameters from the
    pipeline's inputs or from an existing output of a task it depends on; the DAG has no cycle;
    every `granary run` step runs after a `granary precache` step (dependentTasks) and gets the
    same pipeline, seed, dispatcher and at_mark; the precache step is not cached by KFP (a KFP
    cache hit would skip checking that the Granary cache is still complete); the example
    pipeline JSON parses, reads under the deployment's --data_roots, and its first mark op is
    the at_mark it is precached at.

Prints what it checked and every failure; exits 1 if anything failed.
"""

import argparse
import glob
import itertools
import json
import os
import re
import shlex
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from validate_manifests import Checker, Render, all_containers, granary_flags  # noqa: E402

COMPONENT_KEYS = {"name", "description", "metadata", "inputs", "outputs", "implementation"}
IO_KEYS = {"name", "type", "description", "default", "optional", "annotations"}
# KFP's parameter types (v1 names) and their IR names.
PARAMETER_TYPES = {
    "String": "STRING",
    "Integer": "NUMBER_INTEGER",
    "Float": "NUMBER_DOUBLE",
    "Boolean": "BOOLEAN",
    "JsonObject": "STRUCT",
    "JsonArray": "LIST",
}
PIPELINE_KEYS = {"pipelineInfo", "deploymentSpec", "components", "root", "schemaVersion",
                 "sdkVersion", "defaultPipelineRoot"}
TASK_KEYS = {"taskInfo", "componentRef", "inputs", "dependentTasks", "cachingOptions",
             "retryPolicy", "triggerPolicy", "iteratorPolicy"}
REQUIRED_FLAGS = {"precache": {"dispatcher", "pipeline"}, "run": {"dispatcher", "pipeline"}}
TLS_FLAGS = ("tls_cert", "tls_key", "tls_ca")


def k8s_name(name):
    """kfp's maybe_rename_for_k8s: lower case, runs of other characters to one '-'."""
    return re.sub(r"-+", "-", re.sub(r"[^-0-9a-z]+", "-", name.lower())).lstrip("-").rstrip("-")


def ir_default(type_name, default):
    if type_name == "Integer":
        return int(default)
    if type_name == "Float":
        return float(default)
    if type_name == "Boolean":
        return default.lower() == "true"
    if type_name in ("JsonObject", "JsonArray"):
        return json.loads(default)
    return default


class Component:
    """One *.component.yaml: its spec, and what kfp compiles it to."""

    def __init__(self, ck, path):
        self.ck = ck
        self.path = path
        self.where = os.path.basename(path)
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        self.inputs = {}
        self.outputs = {}
        self.used = set()
        self.ok = self.check_spec()

    # --- the component spec ---------------------------------------------------------------
    def check_spec(self):
        ck, doc, where = self.ck, self.doc, self.where
        if not ck.check(isinstance(doc, dict), f"{where}: not a YAML map"):
            return False
        extra = set(doc) - COMPONENT_KEYS
        ck.check(not extra, f"{where}: keys KFP's component spec does not have: {sorted(extra)}")
        ck.check(isinstance(doc.get("name"), str) and k8s_name(doc.get("name", "")),
                 f"{where}: needs a name")
        ck.check(isinstance(doc.get("description"), str), f"{where}: needs a description")
        for kind, target in (("inputs", self.inputs), ("outputs", self.outputs)):
            for i, spec in enumerate(doc.get(kind) or []):
                if not ck.check(isinstance(spec, dict) and isinstance(spec.get("name"), str),
                                f"{where}: {kind}[{i}] needs a name"):
                    continue
                name = spec["name"]
                extra = set(spec) - (IO_KEYS if kind == "inputs" else IO_KEYS - {"default", "optional"})
                ck.check(not extra, f"{where}: {kind} {name}: unknown keys {sorted(extra)}")
                ck.check(re.fullmatch(r"[a-z][a-z0-9_]*", name) is not None,
                         f"{where}: {kind} {name}: use snake_case names (kfp renames others)")
                ck.check(name not in self.inputs and name not in self.outputs,
                         f"{where}: {name} declared twice")
                ck.check(spec.get("type") in PARAMETER_TYPES,
                         f"{where}: {kind} {name}: type {spec.get('type')!r} is no KFP parameter "
                         f"type {sorted(PARAMETER_TYPES)}")
                if "default" in spec:
                    # The component spec's schema: a default is a string (the command-line text).
                    ok = ck.check(isinstance(spec["default"], str),
                                  f"{where}: input {name}: default must be a string, not "
                                  f"{spec['default']!r}")
                    if ok and spec.get("type") in PARAMETER_TYPES:
                        try:
                            ir_default(spec["type"], spec["default"])
                        except ValueError:
                            ck.fail(f"{where}: input {name}: default {spec['default']!r} is no "
                                    f"{spec['type']}")
                target[name] = spec
        impl = (doc.get("implementation") or {}).get("container")
        if not ck.check(isinstance(impl, dict) and set(impl) <= {"image", "command", "args", "env"},
                        f"{where}: implementation.container{{image, command, args}} expected"):
            return False
        ck.check(isinstance(impl.get("image"), str) and impl["image"],
                 f"{where}: implementation.container.image missing")
        for key in ("command", "args"):
            if not ck.check(isinstance(impl.get(key), list), f"{where}: container.{key} must be a list"):
                return False
            for element in impl[key]:
                self.check_placeholder(element)
        for name in list(self.inputs) + list(self.outputs):
            ck.check(name in self.used, f"{where}: {name} is declared but never used")
        return True

    def check_placeholder(self, e, in_if=None):
        ck, where = self.ck, self.where
        if isinstance(e, (str, int, float)) and not isinstance(e, bool):
            return
        if not ck.check(isinstance(e, dict) and len(e) == 1, f"{where}: bad argument {e!r}"):
            return
        (key, value), = e.items()
        if key == "inputValue":
            self.used.add(value)
            if ck.check(value in self.inputs, f"{where}: {{inputValue: {value}}}: no such input"):
                spec = self.inputs[value]
                ck.check(not spec.get("optional") or "default" in spec or in_if is not None,
                         f"{where}: optional input {value} used outside an `if isPresent`"
                         " (the step would fail when it is not given)")
        elif key == "outputPath":
            self.used.add(value)
            ck.check(value in self.outputs, f"{where}: {{outputPath: {value}}}: no such output")
        elif key == "if":
            cond = (value or {}).get("cond") or {}
            name = cond.get("isPresent")
            self.used.add(name)
            if ck.check(set(value) <= {"cond", "then", "else"} and name in self.inputs,
                        f"{where}: if: needs cond: {{isPresent: INPUT}} of a declared input"):
                spec = self.inputs[name]
                ck.check(spec.get("optional") and "default" not in spec,
                         f"{where}: isPresent {name}: only an optional input without default can "
                         "be absent")
            for branch in ("then", "else"):
                items = value.get(branch)
                for item in items if isinstance(items, list) else [items] if items is not None else []:
                    self.check_placeholder(item, in_if=name)
        elif key == "concat":
            for item in value or []:
                self.check_placeholder(item, in_if)
        else:
            ck.fail(f"{where}: placeholder {key} is not one this checker knows")

    # --- what it compiles to -------------------------------------------------------------
    @property
    def name(self):
        return k8s_name(self.doc["name"])

    def ir_placeholder(self, e):
        if not isinstance(e, dict):
            return str(e)
        (key, value), = e.items()
        if key == "inputValue":
            return "{{$.inputs.parameters['%s']}}" % value
        if key == "outputPath":
            return "{{$.outputs.parameters['%s'].output_file}}" % value
        if key == "concat":
            return {"Concat": [self.ir_placeholder(i) for i in value]}
        body = {"InputName": value["cond"]["isPresent"],
                "Then": [self.ir_placeholder(i) for i in value["then"]]}
        if value.get("else"):
            body["Else"] = [self.ir_placeholder(i) for i in value["else"]]
        return {"IfPresent": body}

    def ir_component(self):
        def params(specs, is_input):
            out = {}
            for name, spec in specs.items():
                p = {"parameterType": PARAMETER_TYPES[spec["type"]]}
                if is_input and (spec.get("optional") or "default" in spec):
                    p["isOptional"] = True
                if is_input and "default" in spec:
                    p["defaultValue"] = ir_default(spec["type"], spec["default"])
                out[name] = p
            return {"parameters": out}

        comp = {"executorLabel": f"exec-{self.name}"}
        if self.inputs:
            comp["inputDefinitions"] = params(self.inputs, True)
        if self.outputs:
            comp["outputDefinitions"] = params(self.outputs, False)
        return comp

    def ir_executor(self):
        c = self.doc["implementation"]["container"]
        return {"container": {"image": c["image"],
                              "command": [self.ir_placeholder(e) for e in c["command"]],
                              "args": [self.ir_placeholder(e) for e in c["args"]]}}

    # --- the granary command line ----------------------------------------------------------
    def argv(self, present):
        """The container's args with the inputs in `present` given (others absent), as tokens:
        str literals, ('in', name) values, ('out', name) paths."""
        def expand(e):
            if not isinstance(e, dict):
                return [str(e)]
            (key, value), = e.items()
            if key == "inputValue":
                return [("in", value)]
            if key == "outputPath":
                return [("out", value)]
            if key == "concat":
                parts = [expand(i) for i in value]
                return ["".join(str(p[0]) if isinstance(p[0], str) else f"<{p[0][1]}>" for p in parts)]
            branch = value["then"] if value["cond"]["isPresent"] in present else value.get("else") or []
            out = []
            for item in branch if isinstance(branch, list) else [branch]:
                out += expand(item)
            return out

        tokens = []
        for e in self.doc["implementation"]["container"]["args"]:
            tokens += expand(e)
        return tokens

    def granary_invocation(self):
        """(granary command, flags written in the command, number of leading args that are
        positional parameters) or None."""
        command = self.doc["implementation"]["container"]["command"]
        if command and command[0] == "granary":
            return command[1], command[2:], 0
        if len(command) == 3 and command[0] == "sh" and command[1] in ("-ec", "-c", "-euc"):
            script = command[2]
            lines = [ln.strip() for ln in script.splitlines()
                     if re.match(r"\s*(exec\s+)?granary\s", ln)]
            if not self.ck.check(len(lines) == 1, f"{self.where}: the script must run granary "
                                 f"exactly once, runs it {len(lines)} times"):
                return None
            words = shlex.split(lines[0].split("||")[0].split(">")[0])
            if words[0] == "exec":
                words = words[1:]
            self.ck.check(words[-1] == "$@", f"{self.where}: the granary line must end with \"$@\" "
                          "(the args are its flags)")
            shifts = sum(int(m.group(1) or 1) for m in re.finditer(r"(?m)^\s*shift(?:\s+(\d+))?\s*$", script))
            # `sh -c SCRIPT a0 a1 ...`: a0 is $0, then $1..; each shift drops $1.
            return words[1], [w for w in words[2:-1]], 1 + shifts
        self.ck.fail(f"{self.where}: the container must run `granary <command>` or `sh -ec` "
                     "a script that does")
        return None


def check_granary_command_line(ck, comp, commands, defined, shared):
    """Every combination of present/absent optional inputs gives a valid granary command line."""
    inv = comp.granary_invocation()
    if inv is None:
        return None
    command, inline, positional = inv
    where = f"{comp.where} (granary {command})"
    if not ck.check(command in commands, f"{where}: no command {command} in tools/commands.cc"):
        return None
    allowed = commands[command] | shared
    conditional = sorted({n for n, s in comp.inputs.items() if s.get("optional") and "default" not in s})
    combos = 0
    for r in range(len(conditional) + 1):
        for present in itertools.combinations(conditional, r):
            present = set(present) | {n for n in comp.inputs if n not in conditional}
            tokens = comp.argv(present)
            if not ck.check(len(tokens) >= positional, f"{where}: fewer args than the script's "
                            "positional parameters"):
                return None
            lead = tokens[:positional]
            ck.check(all(not (isinstance(t, str) and t.startswith("-")) for t in lead),
                     f"{where}: positional parameter {lead} looks like a flag")
            words = list(inline) + tokens[positional:]
            flags = {}
            i = 0
            while i < len(words):
                w = words[i]
                if not ck.check(isinstance(w, str) and w.startswith("--"),
                                f"{where}: with {sorted(present)}: {w!r} is no flag (a value "
                                "without its flag?)"):
                    i += 1
                    continue
                name, eq, value = w[2:].partition("=")
                ck.check(name in allowed, f"{where}: --{name} is not a flag of granary {command} "
                         "(tools/commands.cc)")
                ck.check(name in shared or name in defined,
                         f"{where}: --{name} is listed for granary {command} but no ABSL_FLAG "
                         "defines it")
                ck.check(name not in flags, f"{where}: with {sorted(present)}: --{name} twice")
                if not eq and defined.get(name) != "bool":
                    if ck.check(i + 1 < len(words) and not (isinstance(words[i + 1], str)
                                                             and words[i + 1].startswith("--")),
                                f"{where}: --{name} has no value"):
                        value = words[i + 1]
                        i += 1
                flags[name] = value
                i += 1
            for req in REQUIRED_FLAGS.get(command, ()):
                ck.check(req in flags, f"{where}: with {sorted(present)}: no --{req}")
            tls = [f for f in TLS_FLAGS if f in flags]
            ck.check(("insecure" in flags) != bool(tls) and tls in ([], list(TLS_FLAGS)),
                     f"{where}: with {sorted(present)}: give either --insecure or all of "
                     f"--tls_cert/--tls_key/--tls_ca (has {sorted(flags)})")
            if command == "precache":
                ck.check(("at_mark" in flags) == ("at_mark" in present),
                         f"{where}: --at_mark must be given exactly when the at_mark input is")
            if command == "run" and "at_mark" in comp.inputs:
                want = "at_mark" if "at_mark" in present else "full"
                ck.check(flags.get("cache_policy") == want,
                         f"{where}: with at_mark {'present' if 'at_mark' in present else 'absent'}"
                         f" --cache_policy must be {want} (the precache step's policy), not "
                         f"{flags.get('cache_policy')}")
            combos += 1
    return command, combos


def resolve_address(ck, where, address, renders):
    host, _, port = address.rpartition(":")
    for render in renders.values():
        svc = render.find("Service", host.split(".")[0])
        if svc is not None and any(str(p["port"]) == port for p in svc["spec"]["ports"]):
            return True
    ck.fail(f"{where}: {address} is no Service port of the rendered deployment")
    return False


# ------------------------------------------------------------------------------------------
# The pipeline IR.


def parse_ir_arg(a):
    if isinstance(a, str) and a.startswith("{"):
        try:
            return json.loads(a)
        except ValueError:
            return a
    return a


def check_pipeline(ck, path, components, data_roots):
    where = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    if not ck.check(isinstance(spec, dict), f"{where}: not a YAML map"):
        return
    extra = set(spec) - PIPELINE_KEYS
    ck.check(not extra, f"{where}: keys a PipelineSpec does not have: {sorted(extra)}")
    for key in ("pipelineInfo", "deploymentSpec", "components", "root", "schemaVersion"):
        if not ck.check(key in spec, f"{where}: no {key}"):
            return
    ck.check(re.fullmatch(r"2\.\d+\.\d+", str(spec["schemaVersion"])) is not None,
             f"{where}: schemaVersion {spec['schemaVersion']} is not a 2.x PipelineSpec")
    name = spec["pipelineInfo"].get("name", "")
    ck.check(name and k8s_name(name) == name, f"{where}: pipelineInfo.name {name!r} must be a "
             "Kubernetes name")
    executors = spec["deploymentSpec"].get("executors") or {}
    by_key = {f"comp-{c.name}": c for c in components}
    # Components and executors: exactly what the component files compile to.
    ir_components = spec["components"]
    for key, comp_ir in ir_components.items():
        comp = by_key.get(key)
        if not ck.check(comp is not None, f"{where}: component {key} comes from no "
                        "*.component.yaml of deploy/kubeflow"):
            continue
        ck.check(comp_ir == comp.ir_component(),
                 f"{where}: component {key} differs from {comp.where} compiled: "
                 f"{comp_ir} != {comp.ir_component()}")
        label = comp_ir.get("executorLabel")
        executor = executors.get(label)
        if ck.check(executor is not None, f"{where}: component {key}: no executor {label}"):
            got = {"container": dict(executor.get("container") or {})}
            for k in ("command", "args"):
                got["container"][k] = [parse_ir_arg(a) for a in got["container"].get(k) or []]
            ck.check(set(executor) == {"container"} and got == comp.ir_executor(),
                     f"{where}: executor {label} differs from {comp.where} compiled")
    for label in executors:
        ck.check(any(c.get("executorLabel") == label for c in ir_components.values()),
                 f"{where}: executor {label} belongs to no component")
    root = spec["root"]
    root_params = ((root.get("inputDefinitions") or {}).get("parameters")) or {}
    tasks = (root.get("dag") or {}).get("tasks") or {}
    if not ck.check(tasks, f"{where}: root.dag has no tasks"):
        return
    granary_of = {}
    sources = {}
    for tname, task in tasks.items():
        tw = f"{where}: task {tname}"
        extra = set(task) - TASK_KEYS
        ck.check(not extra, f"{tw}: keys a PipelineTaskSpec does not have: {sorted(extra)}")
        ck.check((task.get("taskInfo") or {}).get("name") == tname, f"{tw}: taskInfo.name must be {tname}")
        ref = (task.get("componentRef") or {}).get("name")
        comp = by_key.get(ref)
        if not ck.check(ref in ir_components and comp is not None,
                        f"{tw}: componentRef {ref} is no component of the pipeline"):
            continue
        granary_of[tname] = comp.granary_command
        deps = task.get("dependentTasks") or []
        for d in deps:
            ck.check(d in tasks and d != tname, f"{tw}: depends on {d}, no other task")
        given = (task.get("inputs") or {}).get("parameters") or {}
        sources[tname] = {}
        for pname, source in given.items():
            ck.check(pname in comp.inputs, f"{tw}: input {pname}: {comp.where} has no such input")
            kinds = set(source) & {"componentInputParameter", "taskOutputParameter", "runtimeValue"}
            if not ck.check(len(kinds) == 1 and len(source) == 1, f"{tw}: input {pname}: one of "
                            "componentInputParameter, taskOutputParameter, runtimeValue expected"):
                continue
            if "componentInputParameter" in source:
                p = source["componentInputParameter"]
                if ck.check(p in root_params, f"{tw}: input {pname}: no pipeline input {p}"):
                    ck.check(root_params[p].get("parameterType") ==
                             PARAMETER_TYPES.get(comp.inputs.get(pname, {}).get("type")),
                             f"{tw}: input {pname}: pipeline input {p} has another type")
                sources[tname][pname] = ("pipeline", p)
            elif "taskOutputParameter" in source:
                out = source["taskOutputParameter"]
                producer = out.get("producerTask")
                key = out.get("outputParameterKey")
                pcomp = by_key.get(((tasks.get(producer) or {}).get("componentRef") or {}).get("name"))
                ck.check(pcomp is not None and key in pcomp.outputs,
                         f"{tw}: input {pname}: no output {key} of a task {producer}")
                ck.check(producer in deps, f"{tw}: input {pname} comes from {producer}, which "
                         "must be in its dependentTasks")
                sources[tname][pname] = ("task", producer, key)
            else:
                sources[tname][pname] = ("constant", json.dumps(source["runtimeValue"], sort_keys=True))
        for iname, ispec in comp.inputs.items():
            ck.check(iname in given or ispec.get("optional") or "default" in ispec,
                     f"{tw}: required input {iname} of {comp.where} not given")
    # No cycle.
    state = {}

    def visit(t):
        if state.get(t) == 1:
            return False
        if state.get(t) == 2:
            return True
        state[t] = 1
        ok = all(visit(d) for d in tasks[t].get("dependentTasks") or [] if d in tasks)
        state[t] = 2
        return ok

    ck.check(all(visit(t) for t in tasks), f"{where}: the task graph has a cycle")

    def ancestors(t, seen=None):
        seen = set() if seen is None else seen
        for d in tasks[t].get("dependentTasks") or []:
            if d in tasks and d not in seen:
                seen.add(d)
                ancestors(d, seen)
        return seen

    precaches = [t for t, c in granary_of.items() if c == "precache"]
    trainers = [t for t, c in granary_of.items() if c == "run"]
    ck.check(precaches and trainers, f"{where}: expected a granary precache step and a training "
             f"step (granary run): {granary_of}")
    for t in trainers:
        before = [p for p in precaches if p in ancestors(t)]
        if not ck.check(before, f"{where}: training step {t} does not run after a precache step "
                        "(dependentTasks)"):
            continue
        for p in before:
            for pname in ("pipeline_json", "seed", "dispatcher", "at_mark"):
                a, b = sources[p].get(pname), sources[t].get(pname)
                ck.check(a == b, f"{where}: {p} and {t} must get the same {pname} (the cache is "
                         f"keyed by pipeline, seed and policy): {a} vs {b}")
    for p in precaches:
        ck.check(not (tasks[p].get("cachingOptions") or {}).get("enableCache"),
                 f"{where}: KFP must not cache step {p} (a KFP cache hit would skip checking "
                 "that the Granary cache is still complete): cachingOptions.enableCache false")
        # The example's pipeline JSON and mark, from the pipeline's defaults.
        pj = sources[p].get("pipeline_json")
        if pj and pj[0] == "pipeline":
            text = root_params.get(pj[1], {}).get("defaultValue")
            if text is None:
                continue
            try:
                pipeline = json.loads(text)
            except ValueError as e:
                ck.fail(f"{where}: the default of {pj[1]} is no JSON: {e}")
                continue
            ck.check(isinstance(pipeline, dict) and "source" in pipeline and "ops" in pipeline,
                     f"{where}: the default of {pj[1]} is no Granary PipelineDef (source, ops)")
            files = ((pipeline.get("source") or {}).get("params") or {}).get("files") or []
            for fpath in files:
                ck.check("${" not in fpath and any(fpath.startswith(r.rstrip("/") + "/") for r in data_roots),
                         f"{where}: source file {fpath} must be written out under the "
                         f"deployment's --data_roots {sorted(data_roots)}")
            mark = sources[p].get("at_mark")
            if mark and mark[0] == "pipeline":
                mark_name = root_params.get(mark[1], {}).get("defaultValue")
                marks = [((op.get("params") or {}).get("name")) for op in pipeline.get("ops") or []
                         if op.get("op") == "mark"]
                ck.check(mark_name is None or (marks and marks[0] == mark_name),
                         f"{where}: at_mark {mark_name} must be the pipeline's first mark op {marks}")
    print(f"  {where}: pipeline {name}: {len(tasks)} tasks "
          f"({', '.join(f'{t}: granary {c}' for t, c in granary_of.items())}); "
          f"{', '.join(f'{t} after {sorted(ancestors(t))}' for t in trainers)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--kubeflow", required=True, help="the directory of the KFP files")
    parser.add_argument("renders", nargs="+", help="NAME=FILE of `kubectl kustomize` output: "
                        "the deployment the steps talk to")
    args = parser.parse_args()
    ck = Checker()
    commands, defined, shared = granary_flags(args.repo)
    renders = {}
    for item in args.renders:
        name, path = item.split("=", 1)
        renders[name] = Render(name, path)
    images = set()
    data_roots = set()
    for render in renders.values():
        for o in render.objects:
            if o.get("kind") in ("StatefulSet", "Job"):
                for _, c in all_containers(o):
                    if (c.get("args") or [None])[0] in commands and not c.get("command"):
                        images.add(c["image"])
        for cm in render.of_kind("ConfigMap"):
            for text in (cm.get("data") or {}).values():
                for m in re.finditer(r"(?m)^--data_roots=(.*)$", text):
                    data_roots |= set(m.group(1).split(","))
    components = []
    paths = sorted(glob.glob(os.path.join(args.kubeflow, "*.component.yaml")))
    ck.check(paths, f"{args.kubeflow}: no *.component.yaml")
    for path in paths:
        comp = Component(ck, path)
        comp.granary_command = None
        if not comp.ok:
            continue
        components.append(comp)
        result = check_granary_command_line(ck, comp, commands, defined, shared)
        if result:
            comp.granary_command = result[0]
        image = comp.doc["implementation"]["container"]["image"]
        ck.check(image in images, f"{comp.where}: image {image} is not the Granary image the "
                 f"rendered overlays run ({sorted(images)})")
        default = (comp.inputs.get("dispatcher") or {}).get("default")
        if default:
            resolve_address(ck, f"{comp.where}: default dispatcher", default, renders)
        if result:
            print(f"  {comp.where}: `granary {result[0]}`, {len(comp.inputs)} inputs, "
                  f"{len(comp.outputs)} outputs; {result[1]} combinations of optional inputs "
                  "give valid command lines")
    pipelines = sorted(glob.glob(os.path.join(args.kubeflow, "*.pipeline.yaml")))
    ck.check(pipelines, f"{args.kubeflow}: no *.pipeline.yaml")
    for path in pipelines:
        check_pipeline(ck, path, components, data_roots)
    print(f"{ck.checks} checks, {len(ck.failures)} failed")
    for f in dict.fromkeys(ck.failures):  # each once (the combinations repeat them)
        print(f"FAIL: {f}")
    return 1 if ck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
