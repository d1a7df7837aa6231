#!/usr/bin/python3
"""Checks rendered Kubernetes manifests of Granary offline (called by deploy/validate.sh).

    validate_manifests.py --repo ROOT [--against RENDER=DEPLOYMENT]... [--tls-secret RENDER=FILE]
                          RENDER=FILE...

Each RENDER=FILE is the output of `kubectl kustomize` for one kustomization. Without a cluster,
kubectl cannot validate objects (it needs the API server for the REST mapping and the schema),
so this script does what can be done offline:

  * schema: every object is checked against the Kubernetes API models of Debian's
    python3-kubernetes (the 1.22 API: every field name known, every value of its type, every
    required field present, enumerations respected) — a field newer than 1.22 would be refused;
  * references: ConfigMaps, PVCs, Services, ServiceAccounts, Roles, named ports, volumes and
    $(VAR) references resolve; StatefulSets have their governing headless Service; selectors
    match their pod templates and no other StatefulSet's;
  * granary: every flag given to `granary <command>` — in args and in the --flagfile files,
    read from the ConfigMap they are mounted from — is one that command accepts
    (tools/commands.cc) and the binary defines (ABSL_FLAG); --worker_id is the pod name; the
    address a worker registers is its pod's DNS name under a headless Service; the journal, the
    checkpoints and the cache root are on the right volumes (ReadWriteMany cache at the same path
    everywhere); probes and Prometheus annotations point at --metrics_port, which a
    NetworkPolicy admits only from chosen pods (each rule admitting it has a `from`); the provisioner's
    `kubectl scale` names a StatefulSet the dispatcher's service account may scale (RBAC); a
    replicated dispatcher (--journal etcd://..., issue 32) is a StatefulSet of 2 or more replicas,
    each with --replica_id=$(POD_NAME) and --advertise_address its pod's DNS name under its
    headless Service, no provisioner (the workers have a replica count), and a
    PodDisruptionBudget that keeps a majority of them available;
  * etcd (components/etcd, the replicated dispatcher's journal): a StatefulSet of an odd number
    (3 or more) of members started in parallel, each --name'd by its pod, advertising its pod's
    DNS name under its headless Service (publishNotReadyAddresses), --initial-cluster listing
    exactly those names, its data directory on a ReadWriteOnce volumeClaimTemplate, a
    PodDisruptionBudget keeping a quorum, Debian's etcd from the granary image (the Dockerfile
    installs etcd-server); a --journal of the same render names every member's client address,
    and the members serve TLS with client-certificate auth exactly when the replicas run TLS
    (their certificate files, like the granary pods', are in the TLS Secret);
  * security: non-root (the Dockerfile's uid for granary pods, the image's own numeric user for
    others), read-only root filesystems, no privilege escalation; every container has resource
    requests and a memory limit;
  * Redis (components/redis, the in-memory cache tier of issue 20): redis.conf from
    a mounted ConfigMap, maxmemory at most 80% of the memory limit (request = limit),
    maxmemory-policy noeviction, one replica, persistence only on a PVC, a Service on its port,
    and without a password a NetworkPolicy admitting the dispatcher and the workers by label; a
    --cache_root=redis://HOST:PORT/PREFIX names such a Service with --cache_capacity_bytes at
    most 90% of its maxmemory (a NOTE is printed while the binary has no redis:// tier);
  * the Dockerfile: builds from packages scripts/setup_deps.sh installs, runs as that uid,
    ships kubectl for the provisioner.

Prints one line per check group and every failure; exits 1 if anything failed.
"""

import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

try:
    import kubernetes.client as k8s
    from kubernetes.client.configuration import Configuration
except ImportError:  # pragma: no cover
    sys.exit("validate_manifests.py: needs python3-kubernetes (Debian package); "
             "scripts/setup_deps.sh installs it")

GRANARY_SERVERS = ("dispatcher", "worker")
KNOWN_KINDS = {
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Service"): "V1Service",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "PersistentVolumeClaim"): "V1PersistentVolumeClaim",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("batch/v1", "Job"): "V1Job",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
}
WORKLOAD_KINDS = ("StatefulSet", "Job")


class Checker:
    def __init__(self):
        self.failures = []
        self.checks = 0

    def check(self, condition, message):
        """Counts a check; records `message` as a failure if `condition` is false."""
        self.checks += 1
        if not condition:
            self.failures.append(message)
        return condition

    def fail(self, message):
        self.check(False, message)


# ------------------------------------------------------------------------------------------
# The granary binary's flags, read from its sources.


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def granary_flags(repo):
    """(flags of each command, every ABSL_FLAG name -> its type, Abseil's shared flags)."""
    defined = {}
    for path in sorted(glob.glob(os.path.join(repo, "**", "*.cc"), recursive=True)):
        rel = os.path.relpath(path, repo)
        top = rel.split(os.sep)[0]
        if top.startswith("build") or top in ("bench", "fuzz", "tests") or rel.endswith("_test.cc"):
            continue
        for m in re.finditer(r"ABSL_FLAG\(\s*([^,]+?)\s*,\s*(\w+)\s*,", read(path)):
            defined[m.group(2)] = m.group(1)
    # A command's flags (tools/commands.h): the ABSL_FLAGs of its own tools/<name>_command.cc,
    # those it borrows there with GRANARY_COMMAND_BORROWS_FLAG, and those of the flag-group files
    # its entry in Commands() names.
    def flags_in(rel):
        path = os.path.join(repo, rel)
        if not os.path.exists(path):
            return set()
        src = read(path)
        own = re.findall(r"ABSL_FLAG\(\s*[^,]+?\s*,\s*(\w+)\s*,", src)
        borrowed = re.findall(r"GRANARY_COMMAND_BORROWS_FLAG\(\s*[^,]+?\s*,\s*(\w+)\s*\)", src)
        return set(own) | set(borrowed)

    commands_src = read(os.path.join(repo, "tools", "commands.cc"))
    commands = {}
    for m in re.finditer(r'\{"(\w+)",\s*\w+(?:,\s*\{([^}]*)\})?\}', commands_src):
        name = m.group(1)
        names = flags_in(os.path.join("tools", f"{name}_command.cc"))
        for group in re.findall(r'"([\w/.]+)"', m.group(2) or ""):
            names |= flags_in(group)
        commands[name] = names
    # Abseil's own flags: its usage flags as tools/command_flags.cc lists them (AbseilFlagNames)
    # and the parsing flags Abseil itself defines (absl/flags/parse.cc).
    shared_src = read(os.path.join(repo, "tools", "command_flags.cc"))
    m = re.search(r"AbseilFlagNames\(\)\s*\{.*?\{(.*?)\}", shared_src, re.S)
    shared = set(re.findall(r'"(\w+)"', m.group(1))) if m else set()
    shared |= {"flagfile", "fromenv", "tryfromenv", "undefok"}
    return commands, defined, shared


# ------------------------------------------------------------------------------------------
# Schema validation against python3-kubernetes' models.

_REQUIRED_CACHE = {}


def model_setter_error(klass, attr, value):
    """The ValueError message the model's setter raises for `value` (required, enum), or None."""
    obj = klass.__new__(klass)
    obj.local_vars_configuration = Configuration()
    try:
        setattr(obj, attr, value)
    except ValueError as e:
        return str(e)
    return None


def check_schema(ck, value, type_name, path):
    if type_name.startswith("list["):
        if not ck.check(isinstance(value, list), f"{path}: expected a list, got {value!r}"):
            return
        for i, item in enumerate(value):
            check_schema(ck, item, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.startswith("dict("):
        if not ck.check(isinstance(value, dict), f"{path}: expected a map, got {value!r}"):
            return
        inner = type_name[5:-1].split(", ", 1)[1]
        for k, v in value.items():
            check_schema(ck, v, inner, f"{path}.{k}")
        return
    if type_name == "str":
        ck.check(isinstance(value, str), f"{path}: expected a string, got {value!r}")
        return
    if type_name == "int":
        ck.check(isinstance(value, int) and not isinstance(value, bool),
                 f"{path}: expected an integer, got {value!r}")
        return
    if type_name == "float":
        ck.check(isinstance(value, (int, float)) and not isinstance(value, bool),
                 f"{path}: expected a number, got {value!r}")
        return
    if type_name == "bool":
        ck.check(isinstance(value, bool), f"{path}: expected true or false, got {value!r}")
        return
    if type_name in ("object", "datetime", "date"):  # IntOrString, RawExtension, timestamps
        return
    klass = getattr(k8s, type_name, None)
    if klass is None:
        ck.fail(f"{path}: no model {type_name} in python3-kubernetes")
        return
    if not ck.check(isinstance(value, dict), f"{path}: expected an object ({type_name})"):
        return
    json_to_attr = {v: k for k, v in klass.attribute_map.items()}
    for key, item in value.items():
        attr = json_to_attr.get(key)
        if not ck.check(attr is not None, f"{path}: unknown field '{key}' in {type_name}"):
            continue
        if item is None:
            continue
        check_schema(ck, item, klass.openapi_types[attr], f"{path}.{key}")
        if not isinstance(item, (dict, list)):
            error = model_setter_error(klass, attr, item)
            ck.check(error is None, f"{path}.{key}: {error}")
    if type_name not in _REQUIRED_CACHE:
        _REQUIRED_CACHE[type_name] = [
            a for a in klass.openapi_types if model_setter_error(klass, a, None) is not None]
    for attr in _REQUIRED_CACHE[type_name]:
        key = klass.attribute_map[attr]
        if key in ("apiVersion", "kind"):
            continue
        ck.check(value.get(key) is not None, f"{path}: required field '{key}' missing ({type_name})")


# ------------------------------------------------------------------------------------------
# Helpers over rendered objects.


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def selector_matches(selector, labels):
    """A LabelSelector (matchLabels and matchExpressions) against labels; {} matches all."""
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def quantity_bytes(text):
    """A Kubernetes memory quantity (4Gi, 512M, 1e9) in bytes, or None."""
    m = re.fullmatch(r"([0-9.]+(?:e[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?", str(text))
    if not m:
        return None
    units = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
    return int(float(m.group(1)) * units[m.group(2)])


def redis_bytes(text):
    """A redis.conf memory size (3gb, 512mb, 1g = 10^9, 1073741824) in bytes, or None."""
    m = re.fullmatch(r"([0-9]+)(k|kb|m|mb|g|gb)?", str(text).lower())
    if not m:
        return None
    units = {None: 1, "k": 10**3, "kb": 2**10, "m": 10**6, "mb": 2**20, "g": 10**9, "gb": 2**30}
    return int(m.group(1)) * units[m.group(2)]


def redis_config(text):
    """redis.conf directives: {name: [argument lists, in order]}."""
    config = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        config.setdefault(words[0].lower(), []).append(words[1:])
    return config


def pod_spec(obj):
    return obj["spec"]["template"]["spec"]


def pod_labels(obj):
    return obj["spec"]["template"].get("metadata", {}).get("labels", {}) or {}


def all_containers(obj):
    spec = pod_spec(obj)
    return [("init", c) for c in spec.get("initContainers", []) or []] + \
           [("main", c) for c in spec.get("containers", []) or []]


def expand_env(text, env_names):
    """The $(VAR) names `text` references ($$ escapes a $)."""
    return [m.group(1) for m in re.finditer(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", text)]


def mount_for(container, path):
    """The volumeMount whose mountPath holds `path` (the longest), or None."""
    best = None
    for m in container.get("volumeMounts", []) or []:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best["mountPath"].rstrip("/")):
                best = m
    return best


def volume_source(obj, name):
    """('volume', volume dict) or ('claimTemplate', pvc template) for a volume name, or None."""
    for v in pod_spec(obj).get("volumes", []) or []:
        if v["name"] == name:
            return ("volume", v)
    if obj["kind"] == "StatefulSet":
        for t in obj["spec"].get("volumeClaimTemplates", []) or []:
            if t["metadata"]["name"] == name:
                return ("claimTemplate", t)
    return None


def is_granary_image(image):
    """The image of deploy/Dockerfile, under any registry ([REGISTRY/]granary[:TAG])."""
    return bool(image) and image.split("@")[0].rsplit("/", 1)[-1].split(":")[0] == "granary"


# An etcd member's flags that name its certificate files (components/etcd-tls).
ETCD_TLS_FILE_FLAGS = ("cert-file", "key-file", "trusted-ca-file", "peer-cert-file",
                       "peer-key-file", "peer-trusted-ca-file")


def is_etcd(c):
    """Whether container `c` runs an etcd member."""
    return os.path.basename((c.get("command") or [""])[0]) == "etcd"


def etcd_flags(c):
    """[(flag name, value)] of an etcd container's --flag=value arguments."""
    return [tuple(a[2:].split("=", 1)) if "=" in a else (a[2:], None)
            for a in c.get("args", []) or [] if a.startswith("--")]


def etcd_client_addresses(s):
    """The host:port a client in the StatefulSet `s`'s namespace dials for each etcd member: the
    pod's name under the governing Service, and the container's client port."""
    c = next(c for _, c in all_containers(s) if is_etcd(c))
    port = next((p["containerPort"] for p in c.get("ports", []) or [] if p.get("name") == "client"),
                None)
    service = s["spec"].get("serviceName")
    return [f"{s['metadata']['name']}-{k}.{service}:{port}"
            for k in range(s["spec"].get("replicas", 1))]


def parse_args(args, defined):
    """[(flag name, value or None)] of a granary command line after its command word."""
    out = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        if a.startswith("-") and len(a) > 1:
            body = a.lstrip("-")
            if "=" in body:
                name, value = body.split("=", 1)
            else:
                name, value = body, None
                is_bool = defined.get(name) == "bool" or (
                    name.startswith("no") and defined.get(name[2:]) == "bool")
                if name.startswith("no") and defined.get(name[2:]) == "bool":
                    name = name[2:]
                if not is_bool and i + 1 < len(args) and name in defined:
                    value = args[i + 1]
                    i += 1
            out.append((name, value))
        i += 1
    return out


class Render:
    def __init__(self, name, path):
        self.name = name
        self.path = path
        with open(path, encoding="utf-8") as f:
            self.objects = [o for o in yaml.safe_load_all(f) if o]

    def find(self, kind, name):
        for o in self.objects:
            if o.get("kind") == kind and o.get("metadata", {}).get("name") == name:
                return o
        return None

    def of_kind(self, kind):
        return [o for o in self.objects if o.get("kind") == kind]


# ------------------------------------------------------------------------------------------


class Validator:
    def __init__(self, repo, ck):
        self.repo = repo
        self.ck = ck
        self.commands, self.defined, self.shared = granary_flags(repo)
        self.uid = None
        self.runtime_packages = set()
        self.summaries = []

    # --- the Dockerfile -----------------------------------------------------------------
    def check_dockerfile(self):
        ck = self.ck
        path = os.path.join(self.repo, "deploy", "Dockerfile")
        text = read(path)
        joined = re.sub(r"\\\n", " ", re.sub(r"(?m)^\s*#.*\n", "", text))
        stages = re.split(r"(?m)^FROM\s+", joined)[1:]
        ck.check(len(stages) == 2, "Dockerfile: expected a build stage and a runtime stage")
        if len(stages) != 2:
            return
        ck.check(all(s.startswith("debian:bookworm-slim") for s in stages),
                 "Dockerfile: both stages must be FROM debian:bookworm-slim (Debian 12)")

        def apt_packages(stage):
            pkgs = set()
            for m in re.finditer(r"apt-get install ([^&]*)", stage):
                pkgs |= {t for t in m.group(1).split() if not t.startswith("-")}
            return pkgs

        setup = re.sub(r"(?m)#.*$", "", read(os.path.join(self.repo, "scripts", "setup_deps.sh")))
        deps = set()
        for m in re.finditer(r"packages\+?=\((.*?)\)", setup, re.S):
            deps |= set(m.group(1).split())
        build_pkgs = apt_packages(stages[0])
        missing = sorted(build_pkgs - deps)
        ck.check(build_pkgs and not missing,
                 f"Dockerfile: build-stage packages not installed by scripts/setup_deps.sh: {missing}")
        ck.check("cmake --build" in stages[0] and "--target granary" in stages[0]
                 and "CMAKE_BUILD_TYPE=Release" in stages[0],
                 "Dockerfile: the build stage must run the CMake Release build of `granary`")
        runtime = apt_packages(stages[1])
        self.runtime_packages = runtime
        ck.check(not any(p.endswith("-dev") for p in runtime),
                 f"Dockerfile: -dev packages in the runtime stage: {sorted(runtime)}")
        ck.check("kubernetes-client" in runtime,
                 "Dockerfile: the runtime stage must install kubernetes-client (kubectl) for "
                 "the dispatcher's `kubectl scale` provisioner")
        m = re.search(r"(?m)^USER\s+(\S+)", stages[1])
        user = m.group(1).split(":")[0] if m else "root"
        ck.check(user.isdigit() and int(user) != 0,
                 f"Dockerfile: the runtime stage must run as a numeric non-root USER, not {user}")
        self.uid = int(user) if user.isdigit() else None
        ck.check(re.search(r'(?m)^ENTRYPOINT\s+\["granary"\]', stages[1]) is not None,
                 'Dockerfile: ENTRYPOINT ["granary"] expected')
        ck.check("/usr/share/granary/examples" in stages[1],
                 "Dockerfile: the example pipelines must be at /usr/share/granary/examples")
        print(f"  Dockerfile: 2 stages on debian:bookworm-slim, {len(build_pkgs)} build packages "
              f"(all from setup_deps.sh), {len(runtime)} runtime packages, USER {user}")

    # --- one render ---------------------------------------------------------------------
    def check_render(self, render, against=None, tls_secret=None):
        ck = self.ck
        before = len(ck.failures)
        where = render.name
        seen = set()
        for i, o in enumerate(render.objects):
            api, kind = o.get("apiVersion"), o.get("kind")
            name = (o.get("metadata") or {}).get("name")
            if not ck.check(api and kind and name,
                            f"{where}: object {i} lacks apiVersion, kind or metadata.name"):
                continue
            ck.check((kind, name) not in seen, f"{where}: two {kind} objects named {name}")
            seen.add((kind, name))
            model = KNOWN_KINDS.get((api, kind))
            if ck.check(model is not None, f"{where}: {api} {kind} {name} is not a kind this "
                        f"deployment expects ({sorted(KNOWN_KINDS)})"):
                check_schema(ck, o, model, f"{where}: {kind}/{name}")
        context = [render] + ([against] if against else [])

        def lookup(kind, name):
            for r in context:
                o = r.find(kind, name)
                if o is not None:
                    return o
            return None

        workloads = [o for o in render.objects if o.get("kind") in WORKLOAD_KINDS]
        for w in workloads:
            self.check_workload(render, w, lookup)
        for s in render.of_kind("StatefulSet"):
            self.check_statefulset(render, s, lookup)
        self.etcd = [s for s in render.of_kind("StatefulSet")
                     if any(is_etcd(c) for _, c in all_containers(s))]
        for s in self.etcd:
            self.check_etcd(render, s, lookup)
        self.redis = {}
        for s in render.of_kind("StatefulSet"):
            if any((c.get("command") or [None])[0] == "redis-server" for _, c in all_containers(s)):
                self.check_redis(render, s, lookup)
        for svc in render.of_kind("Service"):
            self.check_service(render, svc)
        granary = {}
        for w in workloads:
            for _, c in all_containers(w):
                cmd = (c.get("args") or [None])[0] if not c.get("command") else None
                if cmd in self.commands:
                    granary.setdefault(cmd, []).append((w, c))
        for command, items in sorted(granary.items()):
            for w, c in items:
                self.check_granary_container(render, w, c, command, lookup)
        dispatchers = granary.get("dispatcher", [])
        workers = granary.get("worker", [])
        if render.of_kind("StatefulSet"):
            ck.check(len(dispatchers) == 1, f"{where}: expected one dispatcher StatefulSet")
            ck.check(len(workers) >= 1, f"{where}: expected worker StatefulSets")
        for w, c in dispatchers:
            self.check_dispatcher(render, w, c, workers, lookup)
        if tls_secret is not None:
            self.check_tls_secret(render, tls_secret, dispatchers, workers)
        status = "ok" if len(ck.failures) == before else "FAILED"
        print(f"  {where}: {len(render.objects)} objects — {status}")
        for line in self.summaries:
            print(f"    {line}")
        self.summaries = []

    def check_workload(self, render, w, lookup):
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        spec = pod_spec(w)
        sc = spec.get("securityContext") or {}
        ck.check(sc.get("runAsNonRoot") is True, f"{where}: securityContext.runAsNonRoot must be true")
        if any(is_granary_image(c.get("image")) for _, c in all_containers(w)):
            ck.check(self.uid is None or sc.get("runAsUser") == self.uid,
                     f"{where}: runAsUser {sc.get('runAsUser')} is not the image's uid {self.uid}")
        else:  # another image (Redis): its own user, numeric and not root
            uid = sc.get("runAsUser")
            ck.check(isinstance(uid, int) and uid > 0,
                     f"{where}: runAsUser must be the image's numeric non-root user, not {uid}")
        ck.check(sc.get("fsGroup") is not None, f"{where}: securityContext.fsGroup unset "
                 "(volumes would not be writable by the non-root user)")
        volumes = {v["name"] for v in spec.get("volumes", []) or []}
        if w["kind"] == "StatefulSet":
            volumes |= {t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", []) or []}
        for v in spec.get("volumes", []) or []:
            if "configMap" in v:
                ck.check(lookup("ConfigMap", v["configMap"]["name"]) is not None,
                         f"{where}: volume {v['name']}: no ConfigMap {v['configMap']['name']}")
            if "persistentVolumeClaim" in v:
                claim = v["persistentVolumeClaim"]["claimName"]
                ck.check(lookup("PersistentVolumeClaim", claim) is not None,
                         f"{where}: volume {v['name']}: no PersistentVolumeClaim {claim}")
        sa = spec.get("serviceAccountName")
        if sa:
            ck.check(lookup("ServiceAccount", sa) is not None, f"{where}: no ServiceAccount {sa}")
        for _, c in all_containers(w):
            cw = f"{where} container {c['name']}"
            ck.check(bool(c.get("image")), f"{cw}: no image")
            csc = c.get("securityContext") or {}
            ck.check(csc.get("readOnlyRootFilesystem") is True,
                     f"{cw}: readOnlyRootFilesystem must be true")
            ck.check(csc.get("allowPrivilegeEscalation") is False,
                     f"{cw}: allowPrivilegeEscalation must be false")
            ck.check("ALL" in ((csc.get("capabilities") or {}).get("drop") or []),
                     f"{cw}: capabilities must drop ALL")
            res = c.get("resources") or {}
            req, lim = res.get("requests") or {}, res.get("limits") or {}
            ck.check("cpu" in req and "memory" in req and "memory" in lim,
                     f"{cw}: resources need requests.cpu, requests.memory and limits.memory")
            for m in c.get("volumeMounts", []) or []:
                ck.check(m["name"] in volumes, f"{cw}: volumeMount {m['name']} names no volume")
            env_names = set()
            for e in c.get("env", []) or []:
                env_names.add(e["name"])
                ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                if ref:
                    cm = lookup("ConfigMap", ref["name"])
                    ck.check(cm is not None and ref["key"] in (cm.get("data") or {}),
                             f"{cw}: env {e['name']}: no key {ref['key']} in ConfigMap {ref['name']}")
            for text in (c.get("command") or []) + (c.get("args") or []):
                for var in expand_env(text, env_names):
                    ck.check(var in env_names, f"{cw}: $({var}) in '{text}' is no env var of "
                             "the container (Kubernetes would leave it unexpanded)")

    def check_statefulset(self, render, s, lookup):
        ck = self.ck
        name = s["metadata"]["name"]
        where = f"{render.name}: StatefulSet/{name}"
        selector = s["spec"]["selector"].get("matchLabels") or {}
        ck.check(labels_match(selector, pod_labels(s)),
                 f"{where}: selector {selector} does not match its pod template's labels")
        for other in render.of_kind("StatefulSet"):
            if other is not s:
                ck.check(not labels_match(selector, pod_labels(other)),
                         f"{where}: its selector also matches the pods of "
                         f"StatefulSet/{other['metadata']['name']}")
        svc_name = s["spec"].get("serviceName")
        svc = lookup("Service", svc_name) if svc_name else None
        if ck.check(svc is not None, f"{where}: serviceName {svc_name} is no Service"):
            ck.check(svc["spec"].get("clusterIP") == "None",
                     f"{where}: its governing Service {svc_name} must be headless (clusterIP: None)")
            ck.check(labels_match(svc["spec"].get("selector") or {}, pod_labels(s)),
                     f"{where}: its governing Service {svc_name} does not select its pods")

    def check_service(self, render, svc):
        ck = self.ck
        where = f"{render.name}: Service/{svc['metadata']['name']}"
        selector = svc["spec"].get("selector") or {}
        pods = [w for w in render.objects if w.get("kind") in WORKLOAD_KINDS
                and labels_match(selector, pod_labels(w))]
        if not ck.check(pods, f"{where}: selector {selector} matches no pod template"):
            return
        for port in svc["spec"].get("ports", []) or []:
            target = port.get("targetPort", port["port"])
            for w in pods:
                ports = [p for _, c in all_containers(w) for p in c.get("ports", []) or []]
                ok = any(p.get("name") == target or p["containerPort"] == target for p in ports)
                ck.check(ok, f"{where}: port {port.get('name')} targets {target}, which "
                         f"{w['kind']}/{w['metadata']['name']} does not expose")

    def flagfile_lines(self, render, w, c, path, lookup):
        """The lines of a --flagfile, read from the ConfigMap mounted where it lies."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        m = mount_for(c, path)
        if not ck.check(m is not None, f"{where}: --flagfile {path} is on no volumeMount"):
            return []
        src = volume_source(w, m["name"])
        cm = lookup("ConfigMap", src[1]["configMap"]["name"]) \
            if src and src[0] == "volume" and "configMap" in src[1] else None
        if not ck.check(cm is not None, f"{where}: --flagfile {path}: volume {m['name']} is no "
                        "ConfigMap of this deployment"):
            return []
        key = os.path.relpath(path, m["mountPath"])
        data = cm.get("data") or {}
        if not ck.check(key in data, f"{where}: --flagfile {path}: no key {key} in ConfigMap "
                        f"{cm['metadata']['name']}"):
            return []
        lines = []
        for raw in data[key].splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            ck.check(line.startswith("-"), f"{where}: {key}: '{line}' is not a flag line "
                     "(absl flag files hold one --flag=value per line)")
            lines.append(line)
        return lines

    def check_granary_container(self, render, w, c, command, lookup):
        """Flags of `granary <command>`: known to the command and defined by the binary."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']} (granary {command})"
        args = c["args"][1:]
        if command == "datagen" and args and not args[0].startswith("-"):
            args = args[1:]  # the dataset kind, e.g. `imagenet`
        flags = parse_args(args, self.defined)
        expanded = []
        for name, value in flags:
            expanded.append((name, value, "args"))
            if name == "flagfile":
                for path in (value or "").split(","):
                    lines = self.flagfile_lines(render, w, c, path, lookup)
                    for n, v in parse_args(lines, self.defined):
                        expanded.append((n, v, os.path.basename(path)))
        allowed = self.commands.get(command, set())
        for name, value, origin in expanded:
            if name in self.shared:
                continue
            ok = name in allowed
            ck.check(ok, f"{where}: --{name} ({origin}) is not a flag of granary {command} "
                     "(tools/commands.cc)")
            if ok:
                ck.check(name in self.defined,
                         f"{where}: --{name} is listed for granary {command} but no ABSL_FLAG defines it")
        values = {}
        for name, value, _ in expanded:
            values[name] = value  # later flags win, as in absl
        c["_granary_flags"] = values
        if command in GRANARY_SERVERS:
            self.check_server(render, w, c, command, values)
        if command == "run":
            target = values.get("dispatcher") or ""
            svc = lookup("Service", target.rpartition(":")[0].split(".")[0])
            ck.check(svc is not None and any(str(p["port"]) == target.rpartition(":")[2]
                                             for p in svc["spec"]["ports"]),
                     f"{where}: --dispatcher={target} names no Service port of the deployment")

    def check_server(self, render, w, c, command, flags):
        """Ports, probes, annotations, paths on volumes: what a dispatcher and a worker share."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", []) or []}
        numbers = set(ports.values())

        def as_int(text):
            return int(text) if text is not None and str(text).isdigit() else None

        grpc = as_int(flags.get("port"))
        metrics = as_int(flags.get("metrics_port"))
        ck.check(grpc is not None and grpc != 0 and grpc in numbers,
                 f"{where}: --port={flags.get('port')} must be a fixed port the container exposes")
        ck.check(metrics is not None and metrics in numbers and metrics != grpc,
                 f"{where}: --metrics_port={flags.get('metrics_port')} must be a port the "
                 "container exposes (the probes and Prometheus use it)")
        host = flags.get("host")
        ck.check(host not in (None, "127.0.0.1", "localhost"),
                 f"{where}: --host={host} is reachable from the pod only")
        ck.check(("insecure" in flags) != any(k in flags for k in ("tls_cert", "tls_key", "tls_ca")),
                 f"{where}: give either --insecure or the TLS flags (SECURITY.md)")
        ck.check(flags.get("log_format") == "json", f"{where}: --log_format=json expected")

        def probe_port(probe):
            port = probe["httpGet"]["port"]
            return ports.get(port) if isinstance(port, str) else port

        for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"),
                           ("startupProbe", "/healthz")):
            probe = c.get(kind)
            if probe is None and kind == "startupProbe":
                continue
            if ck.check(probe is not None and "httpGet" in probe, f"{where}: no HTTP {kind}"):
                ck.check(probe["httpGet"].get("path") == path and probe_port(probe) == metrics,
                         f"{where}: {kind} must GET {path} on --metrics_port {metrics}, not "
                         f"{probe['httpGet'].get('path')} on {probe['httpGet']['port']}")
        # Issue 30: the HTTP endpoint is for the kubelet and Prometheus only. Every ingress rule
        # of a NetworkPolicy selecting the pod that admits the metrics port (by naming it, or
        # naming no ports) must say from where.
        policies = [np for np in render.of_kind("NetworkPolicy")
                    if selector_matches(np["spec"].get("podSelector") or {}, pod_labels(w))
                    and "Ingress" in (np["spec"].get("policyTypes") or ["Ingress"])]
        metrics_rules = [r for np in policies for r in np["spec"].get("ingress") or []
                         if not r.get("ports") or any(p.get("port") in ("metrics", metrics)
                                                      for p in r["ports"])]
        ck.check(policies and metrics_rules and all(r.get("from") for r in metrics_rules),
                 f"{where}: --metrics_port {metrics} needs a NetworkPolicy admitting it only from "
                 "chosen pods (every rule admitting it has a `from`)")
        ann = w["spec"]["template"].get("metadata", {}).get("annotations", {}) or {}
        ck.check(ann.get("prometheus.io/scrape") == "true"
                 and ann.get("prometheus.io/port") == str(metrics)
                 and ann.get("prometheus.io/path") == "/metrics",
                 f"{where}: Prometheus annotations must scrape /metrics on {metrics}: {ann}")
        for root in (flags.get("data_roots") or "").split(","):
            if root:
                m = mount_for(c, root)
                ck.check(m is not None, f"{where}: --data_roots {root} is on no volumeMount")

    def writable_claim(self, render, w, c, path, flag, lookup):
        """The PVC (object or template) a writable path lies on; checks it is one."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        m = mount_for(c, path) if path else None
        if not ck.check(m is not None, f"{where}: --{flag}={path} is on no volumeMount"):
            return None, None
        ck.check(not m.get("readOnly"), f"{where}: --{flag} {path} is mounted read-only")
        src = volume_source(w, m["name"])
        if src and src[0] == "claimTemplate":
            return "template", src[1]
        if src and "persistentVolumeClaim" in src[1]:
            return "claim", lookup("PersistentVolumeClaim", src[1]["persistentVolumeClaim"]["claimName"])
        ck.fail(f"{where}: --{flag} {path} is on volume {m['name']}, which is no "
                "PersistentVolumeClaim (its data would not survive the pod)")
        return None, None

    def check_dispatcher(self, render, w, c, workers, lookup):
        ck = self.ck
        flags = c["_granary_flags"]
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        replicated = flags.get("journal") is not None
        if replicated:
            self.check_replicas(render, w, c, flags, workers, lookup)
        else:
            ck.check(w["kind"] == "StatefulSet" and w["spec"].get("replicas", 1) == 1,
                     f"{where}: the dispatcher must be a StatefulSet of exactly one replica")
            kind, journal = self.writable_claim(render, w, c, flags.get("journal_dir"), "journal_dir",
                                                lookup)
            ck.check(kind == "template" and journal["spec"]["accessModes"] == ["ReadWriteOnce"],
                     f"{where}: --journal_dir must be on a ReadWriteOnce volumeClaimTemplate (one "
                     "dispatcher per journal; it survives rescheduling)")
        cache_root = flags.get("cache_root")
        redis_root = (cache_root or "").startswith("redis://")
        if redis_root:
            self.check_redis_root(render, w, flags, lookup)
        else:
            kind, cache = self.writable_claim(render, w, c, cache_root, "cache_root", lookup)
            ck.check(kind == "claim" and cache is not None
                     and "ReadWriteMany" in cache["spec"].get("accessModes", []),
                     f"{where}: --cache_root must be on a ReadWriteMany PersistentVolumeClaim")
        dmount = mount_for(c, cache_root) if cache_root and not redis_root else None
        for ww, wc in workers:
            wwhere = f"{render.name}: {ww['kind']}/{ww['metadata']['name']}"
            if not redis_root:  # a Redis root is reached over the network, not mounted
                wm = mount_for(wc, cache_root) if cache_root else None
                same = (wm is not None and dmount is not None
                        and wm["mountPath"] == dmount["mountPath"]
                        and volume_source(ww, wm["name"]) == volume_source(w, dmount["name"]))
                ck.check(same, f"{wwhere}: must mount the dispatcher's cache volume at {cache_root}")
            self.check_worker(render, ww, wc, w, lookup)
        if not replicated:
            self.check_provisioner(render, w, c, flags, lookup)

    def check_replicas(self, render, w, c, flags, workers, lookup):
        """A replicated dispatcher (issue 32): replicas journaling to etcd, each named by its pod
        and advertising its stable DNS name; a PodDisruptionBudget keeps a majority up."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        replicas = w["spec"].get("replicas", 1)
        ck.check(w["kind"] == "StatefulSet" and isinstance(replicas, int) and replicas >= 2,
                 f"{where}: a replicated dispatcher (--journal) must be a StatefulSet of at least 2 "
                 f"replicas, not {replicas}")
        journal = flags.get("journal") or ""
        ck.check(journal.startswith("etcd://") and "/" in journal[len("etcd://"):],
                 f"{where}: --journal={journal} is not etcd://HOST:PORT[,HOST:PORT...]/PREFIX")
        ck.check("journal_dir" not in flags,
                 f"{where}: --journal_dir and --journal exclude each other")
        env = {e["name"]: e for e in c.get("env", []) or []}
        pod_name = (((env.get("POD_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {})
        ck.check(flags.get("replica_id") == "$(POD_NAME)" and pod_name.get("fieldPath") == "metadata.name",
                 f"{where}: --replica_id must be $(POD_NAME), the env var of the downward API's "
                 "metadata.name (unique among the live replicas, stable across restarts)")
        service = w["spec"].get("serviceName")
        advertised = flags.get("advertise_address") or ""
        host, _, port = advertised.rpartition(":")
        labels = host.split(".")
        grpc_port = str(flags.get("port"))
        ck.check(len(labels) >= 3 and labels[0] == "$(POD_NAME)" and labels[1] == service
                 and port == grpc_port,
                 f"{where}: --advertise_address={advertised} must be the pod's DNS name "
                 f"$(POD_NAME).{service}.…:{grpc_port} (where the other replicas redirect callers)")
        svc = lookup("Service", service)
        ck.check(svc is not None and svc["spec"].get("publishNotReadyAddresses") is True,
                 f"{where}: its headless Service {service} must publishNotReadyAddresses (a "
                 "replica's DNS name must resolve while it is not ready)")
        ck.check(flags.get("provisioner", "none") == "none",
                 f"{where}: a replicated dispatcher has no provisioner yet (--provisioner=none)")
        for ww, _ in workers:
            ck.check(ww["spec"].get("replicas") is not None,
                     f"{render.name}: {ww['kind']}/{ww['metadata']['name']}: without a provisioner "
                     "the workers need an explicit replica count")
        self.check_majority_budget(render, w, where)
        for etcd in self.etcd:
            members = etcd_client_addresses(etcd)
            endpoints = journal[len("etcd://"):].split("/", 1)[0].split(",")
            # "<pod>.<service>:<port>", the namespace and domain (if given) left out.
            named = [".".join(e.rpartition(":")[0].split(".")[:2]) + ":" + e.rpartition(":")[2]
                     for e in endpoints]
            ck.check(sorted(named) == sorted(members),
                     f"{where}: --journal names {endpoints}, not the members of "
                     f"StatefulSet/{etcd['metadata']['name']} in this render ({members})")
            # The replicas secure their etcd connections as their own server (EtcdClient gets
            # the dispatcher's TransportSecurity): TLS with their certificate, or plain text.
            member = dict(etcd_flags(next(c for _, c in all_containers(etcd) if is_etcd(c))))
            tls = "insecure" not in flags
            serves_tls = (member.get("advertise-client-urls") or "").startswith("https://")
            ck.check(serves_tls == tls and (not tls or (
                "client-cert-auth" in member and member.get("trusted-ca-file") is not None)),
                     f"{where}: the replicas speak {'TLS' if tls else 'plain text'} to etcd "
                     f"(they are {'not ' if tls else ''}--insecure), so StatefulSet/"
                     f"{etcd['metadata']['name']} must serve "
                     + ("https client URLs with --client-cert-auth and --trusted-ca-file "
                        "(components/etcd-tls)" if tls else "http client URLs"))
        self.summaries.append(
            f"dispatcher: {replicas} replicas journaling to {journal}, advertising {advertised}")

    def check_majority_budget(self, render, w, where):
        """One PodDisruptionBudget of the StatefulSet `w`'s pods keeps a majority available."""
        replicas = w["spec"].get("replicas", 1)
        budgets = [p for p in render.of_kind("PodDisruptionBudget")
                   if labels_match(p["spec"].get("selector", {}).get("matchLabels") or {},
                                   pod_labels(w))]
        majority = replicas // 2 + 1 if isinstance(replicas, int) else 0
        keeps = [p for p in budgets
                 if (isinstance(p["spec"].get("maxUnavailable"), int)
                     and replicas - p["spec"]["maxUnavailable"] >= majority)
                 or (isinstance(p["spec"].get("minAvailable"), int)
                     and p["spec"]["minAvailable"] >= majority)]
        self.ck.check(len(keeps) == 1,
                      f"{where}: needs one PodDisruptionBudget of its pods keeping a majority "
                      f"({majority} of {replicas}) available")

    # --- etcd (components/etcd: the replicated dispatcher's journal) ---------------------------
    def check_etcd(self, render, s, lookup):
        """A StatefulSet of etcd members: odd, started in parallel, each named by its pod and
        advertising its stable DNS name, the initial cluster exactly those names, data on its own
        volume, a quorum kept through voluntary disruptions, Debian's etcd from the granary
        image."""
        ck = self.ck
        name = s["metadata"]["name"]
        where = f"{render.name}: StatefulSet/{name}"
        c = next(c for _, c in all_containers(s) if is_etcd(c))
        replicas = s["spec"].get("replicas", 1)
        ck.check(isinstance(replicas, int) and replicas >= 3 and replicas % 2 == 1,
                 f"{where}: etcd needs an odd number of members, 3 or more (a quorum survives a "
                 f"member's loss), not {replicas}")
        ck.check(s["spec"].get("podManagementPolicy") == "Parallel",
                 f"{where}: podManagementPolicy must be Parallel (a member is ready only once a "
                 "quorum has formed: an ordered start never forms one)")
        service = s["spec"].get("serviceName")
        svc = lookup("Service", service)
        ck.check(svc is not None and svc["spec"].get("publishNotReadyAddresses") is True,
                 f"{where}: its headless Service {service} must publishNotReadyAddresses (the "
                 "members must resolve each other before any is ready)")
        if is_granary_image(c.get("image")):
            ck.check("etcd-server" in self.runtime_packages,
                     f"{where}: runs etcd from the granary image, whose runtime stage must "
                     "install Debian's etcd-server (deploy/Dockerfile)")
        flags = dict(etcd_flags(c))
        ck.check(flags.get("name") == "$(POD_NAME)",
                 f"{where}: --name must be $(POD_NAME) (the member's name is its pod's)")
        env = {e["name"]: e for e in c.get("env", []) or []}
        pod_name = (((env.get("POD_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {})
        ck.check(pod_name.get("fieldPath") == "metadata.name",
                 f"{where}: POD_NAME must be the downward API's metadata.name")
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", []) or []}
        for flag, port in (("advertise-client-urls", "client"),
                           ("initial-advertise-peer-urls", "peer")):
            url = flags.get(flag) or ""
            host, _, at = url.split("://", 1)[-1].rpartition(":")
            labels = host.split(".")
            ck.check(len(labels) >= 2 and labels[0] == "$(POD_NAME)" and labels[1] == service
                     and at == str(ports.get(port)),
                     f"{where}: --{flag}={url} must be the pod's DNS name "
                     f"$(POD_NAME).{service}.…:{ports.get(port)} (its {port} port)")
        peer_url = flags.get("initial-advertise-peer-urls") or ""
        expected = sorted(f"{name}-{k}={peer_url.replace('$(POD_NAME)', f'{name}-{k}')}"
                          for k in range(replicas if isinstance(replicas, int) else 0))
        initial = sorted((flags.get("initial-cluster") or "").split(","))
        ck.check(initial == expected,
                 f"{where}: --initial-cluster must list each pod's name and peer URL, "
                 f"{expected}, not {initial}")
        data_dir = flags.get("data-dir") or ""
        m = mount_for(c, data_dir) if data_dir else None
        src = volume_source(s, m["name"]) if m else None
        ck.check(src is not None and src[0] == "claimTemplate"
                 and src[1]["spec"].get("accessModes") == ["ReadWriteOnce"],
                 f"{where}: --data-dir={data_dir} must be on a ReadWriteOnce volumeClaimTemplate "
                 "(each member's log survives its pod)")
        self.check_majority_budget(render, s, where)
        self.summaries.append(f"{name}: {replicas} etcd members, clients at "
                              f"{','.join(etcd_client_addresses(s))}")

    # --- Redis (the in-memory cache tier of issue 20) ------------------------------------------
    def check_redis(self, render, s, lookup):
        """A Redis StatefulSet: its redis.conf (from a ConfigMap) bounds memory below the
        container's limit, never evicts, is persistent only on a PVC, is reachable through a
        Service on its port, and, without a password, admits only granary pods."""
        ck = self.ck
        name = s["metadata"]["name"]
        where = f"{render.name}: StatefulSet/{name}"
        c = next(c for _, c in all_containers(s) if (c.get("command") or [None])[0] == "redis-server")
        command = c["command"]
        conf_path = command[1] if len(command) > 1 and command[1].endswith(".conf") else None
        if not ck.check(conf_path is not None, f"{where}: redis-server must be given its redis.conf"):
            return
        m = mount_for(c, conf_path)
        src = volume_source(s, m["name"]) if m else None
        cm = lookup("ConfigMap", src[1]["configMap"]["name"]) \
            if src and src[0] == "volume" and "configMap" in src[1] else None
        key = os.path.relpath(conf_path, m["mountPath"]) if m else None
        if not ck.check(cm is not None and key in (cm.get("data") or {}),
                        f"{where}: {conf_path} is no key of a ConfigMap mounted there"):
            return
        config = redis_config(cm["data"][key])

        def last(directive, default=None):
            values = config.get(directive)
            return values[-1] if values else default

        clustered = (last("cluster-enabled", ["no"]) or ["no"])[0] == "yes"
        ck.check(clustered or s["spec"].get("replicas", 1) == 1,
                 f"{where}: more than one Redis replica without Redis Cluster are separate, "
                 "unrelated stores")
        port = int((last("port", ["6379"]) or ["6379"])[0])
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
        ck.check(port in ports.values(), f"{where}: redis.conf port {port} is no container port")
        maxmemory = redis_bytes((last("maxmemory", ["0"]) or ["0"])[0])
        limits = (c.get("resources") or {}).get("limits") or {}
        requests = (c.get("resources") or {}).get("requests") or {}
        limit = quantity_bytes(limits.get("memory"))
        ck.check(maxmemory and limit and maxmemory <= 0.8 * limit,
                 f"{where}: redis.conf maxmemory ({maxmemory} bytes) must be set and at most 80% of "
                 f"the container's memory limit ({limits.get('memory')}): Redis needs the rest "
                 "(fragmentation, buffers), the kernel kills it past the limit")
        ck.check(requests.get("memory") == limits.get("memory"),
                 f"{where}: memory request {requests.get('memory')} must equal the limit "
                 f"{limits.get('memory')} (Guaranteed QoS: evicted last, which empties it)")
        policy = (last("maxmemory-policy", ["noeviction"]) or ["noeviction"])[0]
        ck.check(policy == "noeviction",
                 f"{where}: maxmemory-policy {policy}: Redis would delete committed chunks behind "
                 "the dispatcher's back; noeviction expected (a write that does not fit fails)")
        persistent = (last("appendonly", ["no"]) or ["no"])[0] == "yes" or \
            any(args and args != [""] for args in config.get("save", [[]]))
        if persistent:
            dir_path = (last("dir", ["/data"]) or ["/data"])[0]
            dm = mount_for(c, dir_path)
            dsrc = volume_source(s, dm["name"]) if dm else None
            ck.check(dsrc is not None and (dsrc[0] == "claimTemplate"
                                           or "persistentVolumeClaim" in dsrc[1]),
                     f"{where}: persistence is on (save/appendonly) but dir {dir_path} is on no "
                     "PersistentVolumeClaim: it would not survive the pod")
        labels = pod_labels(s)
        services = [svc for svc in render.of_kind("Service")
                    if labels_match(svc["spec"].get("selector") or {}, labels)
                    and any(p["port"] == port for p in svc["spec"].get("ports") or [])]
        ck.check(services, f"{where}: no Service selects it on port {port}")
        open_access = (last("protected-mode", ["yes"]) or ["yes"])[0] == "no" and \
            not config.get("requirepass") and not config.get("aclfile") and not config.get("user")
        if open_access:
            policies = [np for np in render.of_kind("NetworkPolicy")
                        if selector_matches(np["spec"].get("podSelector") or {}, labels)
                        and "Ingress" in (np["spec"].get("policyTypes") or ["Ingress"])]
            granary_pods = [o for o in render.of_kind("StatefulSet")
                            if any(c2.get("args") and c2["args"][0] in GRANARY_SERVERS
                                   and not c2.get("command") for _, c2 in all_containers(o))]
            if ck.check(policies, f"{where}: Redis without a password (protected-mode no) needs a "
                        "NetworkPolicy admitting only the granary pods"):
                rules = [r for np in policies for r in np["spec"].get("ingress") or []]
                ck.check(all(r.get("from") for r in rules),
                         f"{where}: a NetworkPolicy ingress rule without `from` admits every pod")
                peers = [p for r in rules for p in r.get("from") or []]
                ck.check(all("podSelector" in p and "ipBlock" not in p for p in peers),
                         f"{where}: the NetworkPolicy must admit pods by label only")
                for o in granary_pods:
                    ck.check(any(selector_matches(p.get("podSelector") or {}, pod_labels(o))
                                 for p in peers),
                             f"{where}: its NetworkPolicy shuts out {o['metadata']['name']}")
        for svc in services:
            self.redis[svc["metadata"]["name"]] = {"port": port, "maxmemory": maxmemory}
        self.summaries.append(
            f"{name}: Redis, maxmemory {maxmemory} bytes of a {limits.get('memory')} limit, "
            f"policy {policy}, persistence {'on' if persistent else 'off'}, Service "
            f"{', '.join(svc['metadata']['name'] for svc in services)}:{port}")

    def check_redis_root(self, render, w, flags, lookup):
        """--cache_root=redis://HOST:PORT/PREFIX names a checked Redis of this deployment."""
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        root = flags["cache_root"]
        m = re.fullmatch(r"redis://([a-z0-9.-]+):([0-9]+)/([A-Za-z0-9_.-]+)", root)
        if not ck.check(m is not None, f"{where}: --cache_root={root} is not "
                        "redis://HOST:PORT/PREFIX"):
            return
        host, port = m.group(1).split(".")[0], int(m.group(2))
        redis = self.redis.get(host)
        if not ck.check(redis is not None and redis["port"] == port,
                        f"{where}: --cache_root={root}: no Redis Service {host} on port {port} "
                        "in this deployment"):
            return
        capacity = flags.get("cache_capacity_bytes")
        ck.check(capacity is not None and capacity.isdigit()
                 and int(capacity) <= 0.9 * redis["maxmemory"],
                 f"{where}: --cache_capacity_bytes={capacity} must be at most 90% of Redis' "
                 f"maxmemory {redis['maxmemory']} (the dispatcher evicts whole caches before "
                 "Redis refuses writes; the rest is Redis' per-key overhead)")
        self.summaries.append(f"dispatcher: cache root {root} (Redis {host}:{port})")

    def check_worker(self, render, w, c, dispatcher, lookup):
        ck = self.ck
        flags = c["_granary_flags"]
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        env = {e["name"]: e for e in c.get("env", []) or []}
        pod_name = (((env.get("POD_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {})
        ck.check(w["kind"] == "StatefulSet", f"{where}: workers must be a StatefulSet (stable ids)")
        ck.check(flags.get("worker_id") == "$(POD_NAME)" and pod_name.get("fieldPath") == "metadata.name",
                 f"{where}: --worker_id must be $(POD_NAME), the env var of the downward API's "
                 "metadata.name (a rescheduled pod then gets its tasks back)")
        service = w["spec"].get("serviceName")
        host = flags.get("host") or ""
        labels = host.split(".")
        ck.check(len(labels) >= 3 and labels[0] == "$(POD_NAME)" and labels[1] == service,
                 f"{where}: --host={host} must be the pod's DNS name $(POD_NAME).{service}.… "
                 "(the address it registers for trainers)")
        svc = lookup("Service", service)
        ck.check(svc is not None and svc["spec"].get("publishNotReadyAddresses") is True,
                 f"{where}: its headless Service {service} must publishNotReadyAddresses (a "
                 "worker's DNS name must resolve while it is not ready)")
        kind, tmpl = self.writable_claim(render, w, c, flags.get("checkpoint_dir"), "checkpoint_dir", lookup)
        ck.check(kind == "template", f"{where}: --checkpoint_dir must be on the pod's own "
                 "volumeClaimTemplate (a restarted worker resumes from it)")
        target = flags.get("dispatcher") or ""
        host, _, port = target.rpartition(":")
        dsvc = lookup("Service", host.split(".")[0])
        ck.check(dsvc is not None and port.isdigit()
                 and any(p["port"] == int(port) for p in dsvc["spec"]["ports"])
                 and labels_match(dsvc["spec"].get("selector") or {}, pod_labels(dispatcher)),
                 f"{where}: --dispatcher={target} must name a Service port of the dispatcher")
        standby = "standby" in flags
        if standby:
            ck.check(w["spec"].get("replicas") is not None,
                     f"{where}: standbys need an explicit replica count")
        self.summaries.append(
            f"{w['metadata']['name']}: {'standby' if standby else 'active'} workers, replicas "
            f"{w['spec'].get('replicas', 'set by the provisioner')}, "
            f"requests {c['resources']['requests']}, limits {c['resources']['limits']}")

    def check_provisioner(self, render, w, c, flags, lookup):
        ck = self.ck
        where = f"{render.name}: {w['kind']}/{w['metadata']['name']}"
        if flags.get("provisioner") != "command":
            ck.fail(f"{where}: expected --provisioner=command (the kubectl scale wiring)")
            return
        command = flags.get("provision_command") or ""
        words = command.split()
        ok = (len(words) >= 5 and words[:3] == ["kubectl", "scale", "statefulset"]
              and "--replicas={n}" in words)
        if not ck.check(ok, f"{where}: --provision_command '{command}' is not "
                        "`kubectl scale statefulset NAME --replicas={n}`"):
            return
        target = words[3]
        sts = lookup("StatefulSet", target)
        ck.check(sts is not None, f"{where}: --provision_command scales {target}, no StatefulSet here")
        if sts is not None:
            ck.check("replicas" not in sts["spec"],
                     f"{where}: StatefulSet {target} sets replicas, which every `kubectl apply` "
                     "would reset under the provisioner: leave it to the provisioner")
            wc = [c2 for _, c2 in all_containers(sts) if "_granary_flags" in c2]
            ck.check(wc and "standby" not in wc[0]["_granary_flags"],
                     f"{where}: the provisioner must scale the active workers, not standbys")
        lo, hi = flags.get("min_workers"), flags.get("max_workers")
        ck.check(lo is not None and hi is not None and lo.isdigit() and hi.isdigit()
                 and 0 <= int(lo) <= int(hi) and int(hi) >= 1,
                 f"{where}: needs 0 <= --min_workers ({lo}) <= --max_workers ({hi}), max >= 1")
        # RBAC: the pod's service account may get the StatefulSet and patch its scale.
        spec = pod_spec(w)
        sa_name = spec.get("serviceAccountName", "default")
        sa = lookup("ServiceAccount", sa_name)
        ck.check(spec.get("automountServiceAccountToken") is not False
                 and (sa is None or sa.get("automountServiceAccountToken") is not False),
                 f"{where}: kubectl needs the service account token mounted")
        namespace = w["metadata"].get("namespace")
        granted = {}
        for rb in render.of_kind("RoleBinding"):
            subjects = rb.get("subjects") or []
            if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa_name
                       and s.get("namespace", namespace) == namespace for s in subjects):
                continue
            role = lookup(rb["roleRef"]["kind"], rb["roleRef"]["name"])
            if not ck.check(role is not None, f"{render.name}: RoleBinding/{rb['metadata']['name']}"
                            f" refers to no {rb['roleRef']['kind']} {rb['roleRef']['name']}"):
                continue
            for rule in role.get("rules") or []:
                if not set(rule.get("apiGroups") or []) & {"apps", "*"}:
                    continue
                names = rule.get("resourceNames") or []
                if names and target not in names:
                    continue
                for res in rule.get("resources") or []:
                    granted.setdefault(res, set()).update(rule.get("verbs") or [])
        need = {"statefulsets": {"get"}, "statefulsets/scale": {"get", "patch", "update"}}
        for res, verbs in need.items():
            have = granted.get(res, set()) | granted.get("*", set())
            ck.check("*" in have or verbs <= have,
                     f"{where}: service account {sa_name} may not {sorted(verbs - have)} "
                     f"{res} {target} (needed by `kubectl scale`)")
        self.summaries.append(
            f"dispatcher: provisioner `{command}` with {lo}..{hi} workers; service account "
            f"{sa_name} granted {({k: sorted(v) for k, v in sorted(granted.items())})}")

    def check_tls_secret(self, render, secret_path, dispatchers, workers):
        """The Secret make-tls-secret.sh wrote holds every file the pods' TLS flags name."""
        ck = self.ck
        with open(secret_path, encoding="utf-8") as f:
            secret = yaml.safe_load(f)
        where = f"{render.name}: Secret from make-tls-secret.sh"
        check_schema(ck, secret, "V1Secret", where)
        keys = set((secret.get("data") or {}).keys())
        pods = []
        for w, c in dispatchers + workers:
            flags = c["_granary_flags"]
            for flag in ("tls_cert", "tls_key", "tls_ca"):
                path = flags.get(flag) or ""
                m = mount_for(c, path)
                src = volume_source(w, m["name"]) if m else None
                ck.check(src is not None and src[0] == "volume"
                         and (src[1].get("secret") or {}).get("secretName")
                         == secret["metadata"]["name"],
                         f"{where}: --{flag}={path} of {w['metadata']['name']} is not on the "
                         f"Secret {secret['metadata']['name']}")
            if any(w is d for d, _ in dispatchers):
                count = w["spec"].get("replicas", 1)
            elif "standby" in flags:
                count = w["spec"].get("replicas", 0)
            elif w["spec"].get("replicas") is not None:  # no provisioner: a fixed count
                count = w["spec"]["replicas"]
            else:
                hi = dispatchers[0][1]["_granary_flags"].get("max_workers") if dispatchers else "0"
                count = int(hi or 0)
            for k in range(count):
                pod = f"{w['metadata']['name']}-{k}"
                pods.append(pod)
                for flag in ("tls_cert", "tls_key", "tls_ca"):
                    key = os.path.basename((flags.get(flag) or "").replace("$(POD_NAME)", pod))
                    ck.check(key in keys, f"{where}: pod {pod} needs key {key} (--{flag})")
        for etcd in self.etcd:
            c = next(c for _, c in all_containers(etcd) if is_etcd(c))
            flags = dict(etcd_flags(c))
            for k in range(etcd["spec"].get("replicas", 1)):
                pod = f"{etcd['metadata']['name']}-{k}"
                pods.append(pod)
                for flag in ETCD_TLS_FILE_FLAGS:
                    if flags.get(flag) is None:
                        continue
                    key = os.path.basename(flags[flag].replace("$(POD_NAME)", pod))
                    ck.check(key in keys, f"{where}: etcd member {pod} needs key {key} (--{flag})")
        self.summaries.append(f"TLS Secret: {len(keys)} files cover {len(pods)} pods "
                              f"({pods[0]} .. {pods[-1]})" if pods else "TLS Secret: no pods")


# ------------------------------------------------------------------------------------------
# kustomize ignores a patch (or a replicas or images entry) whose target matches nothing: a
# renamed object would silently lose its overlay's changes. Each entry must change the output.

TRANSFORMER_FIELDS = ("patches", "replicas", "images", "configMapGenerator", "labels")


def render_all(kubectl, k8s_dir, tops):
    outputs = {}
    for top in tops:
        r = subprocess.run([kubectl, "kustomize", os.path.join(k8s_dir, top)],
                           capture_output=True, text=True)
        outputs[top] = r.stdout if r.returncode == 0 else f"<failed: {r.stderr.strip()}>"
    return outputs


def kustomization_dirs(k8s_dir, top):
    """The directories of the kustomizations `top` builds on (itself included)."""
    seen = set()
    todo = [os.path.normpath(os.path.join(k8s_dir, top))]
    while todo:
        d = todo.pop()
        if d in seen or not os.path.isfile(os.path.join(d, "kustomization.yaml")):
            continue
        seen.add(d)
        with open(os.path.join(d, "kustomization.yaml"), encoding="utf-8") as f:
            doc = yaml.safe_load(f) or {}
        for entry in (doc.get("resources") or []) + (doc.get("components") or []):
            todo.append(os.path.normpath(os.path.join(d, entry)))
    return seen


def check_entries_effective(ck, kubectl, k8s_dir, tops):
    reference = render_all(kubectl, k8s_dir, tops)
    users = {top: kustomization_dirs(k8s_dir, top) for top in tops}
    count = 0
    for kfile in sorted(glob.glob(os.path.join(k8s_dir, "**", "kustomization.yaml"), recursive=True)):
        rel = os.path.relpath(kfile, k8s_dir)
        dependents = [t for t in tops if os.path.dirname(os.path.normpath(kfile)) in users[t]]
        with open(kfile, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for field in TRANSFORMER_FIELDS:
            for i, entry in enumerate(doc.get(field) or []):
                count += 1
                with tempfile.TemporaryDirectory() as tmp:
                    copy = os.path.join(tmp, "k8s")
                    shutil.copytree(k8s_dir, copy)
                    changed = dict(doc)
                    changed[field] = [e for j, e in enumerate(doc[field]) if j != i]
                    if not changed[field]:
                        del changed[field]
                    with open(os.path.join(copy, rel), "w", encoding="utf-8") as f:
                        yaml.safe_dump(changed, f)
                    without = render_all(kubectl, copy, dependents)
                label = entry.get("path") or entry.get("name") or \
                    (entry.get("target") or {}).get("name") or entry
                ck.check(any(without[t] != reference[t] for t in dependents),
                         f"{rel}: {field} entry {i} ({label}) changes nothing in any render: "
                         "does its target still exist?")
    print(f"  {count} patches/replicas/images/generators/labels entries, each changes the output")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--against", action="append", default=[],
                        help="RENDER=DEPLOYMENT: resolve RENDER's references in DEPLOYMENT too")
    parser.add_argument("--tls-secret", action="append", default=[],
                        help="RENDER=FILE: the Secret manifest RENDER's pods mount")
    parser.add_argument("--entries-effective", metavar="K8S_DIR",
                        help="only check that every patch/replicas/images/generator/labels entry "
                        "of the kustomizations under K8S_DIR changes a render of RENDERS (dirs)")
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("renders", nargs="+", help="NAME=FILE of `kubectl kustomize` output")
    args = parser.parse_args()
    ck = Checker()
    if args.entries_effective:
        check_entries_effective(ck, args.kubectl, args.entries_effective,
                                [r.split("=", 1)[1] for r in args.renders])
        for f in ck.failures:
            print(f"FAIL: {f}")
        return 1 if ck.failures else 0
    v = Validator(args.repo, ck)
    print(f"granary flags read from the sources: {len(v.commands)} commands, "
          f"{len(v.defined)} ABSL_FLAGs")
    v.check_dockerfile()
    renders = {}
    for item in args.renders:
        name, path = item.split("=", 1)
        renders[name] = Render(name, path)
    against = dict(a.split("=", 1) for a in args.against)
    secrets = dict(a.split("=", 1) for a in args.tls_secret)
    for name, render in renders.items():
        v.check_render(render, renders.get(against.get(name)), secrets.get(name))
    print(f"{ck.checks} checks, {len(ck.failures)} failed")
    for f in ck.failures:
        print(f"FAIL: {f}")
    return 1 if ck.failures else 0


if __name__ == "__main__":
    sys.exit(main())
