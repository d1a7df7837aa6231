#!/usr/bin/python3
"""Runs a rendered overlay's exact granary command lines as local processes (no cluster).

    deploy/validate.sh OUT                      # renders OUT/small.yaml, OUT/smoke-test.yaml
    deploy/emulate_locally.py --binary build/tools/granary --rendered OUT [--work DIR]

What a Kubernetes node would do with the manifests, done by hand on this machine:
  * the ConfigMap's flag files are written to DIR/etc/granary; every path of the pods
    (/etc/granary, /var/lib/granary/..., /data) is mapped under DIR;
  * the dispatcher runs with the StatefulSet's args; `kubectl` on its PATH is a stand-in that
    records the provisioner's calls;
  * two workers run with the worker StatefulSet's args, $(POD_NAME) = granary-worker-0/1 and
    --host = this machine's host name (resolved through /etc/hosts, as a pod resolves its own
    DNS name), each on its own ports (they share one network namespace here);
  * the probes' and Prometheus' endpoints are fetched as the kubelet and Prometheus would, and
    the logs must be JSON lines;
  * the smoke test Job's containers run in order (datagen with fewer images) and its verdict;
  * worker granary-worker-0 is SIGKILLed and started again with the same args (a rescheduled
    pod): it must come back as incarnation 2; the dispatcher is SIGKILLed and started again on
    its journal: it must be ready again with the smoke job in its state.
Exits 1 on the first thing that does not hold.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

GRPC = {"granary-dispatcher-0": 25051, "granary-worker-0": 25052, "granary-worker-1": 25053}
HTTP = {"granary-dispatcher-0": 28080, "granary-worker-0": 28081, "granary-worker-1": 28082}


def die(message):
    print(f"emulate_locally.py: FAIL: {message}")
    sys.exit(1)


def http_get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return None, str(e)


def wait_ready(port, what, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if http_get(port, "/readyz")[0] == 200:
            return
        time.sleep(0.1)
    die(f"{what}: /readyz not 200 within {seconds} s")


class Emulation:
    def __init__(self, binary, rendered, work):
        self.binary = os.path.abspath(binary)
        self.work = work
        self.host = socket.gethostname()
        docs = [d for d in yaml.safe_load_all(open(os.path.join(rendered, "small.yaml"))) if d]
        self.sts = {d["metadata"]["name"]: d for d in docs if d["kind"] == "StatefulSet"}
        config = [d for d in docs if d["kind"] == "ConfigMap"][0]
        self.job = [d for d in yaml.safe_load_all(open(os.path.join(rendered, "smoke-test.yaml")))
                    if d][0]
        shutil.rmtree(work, ignore_errors=True)
        for sub in ("etc/granary", "data", "bin", "logs", "work", "cache"):
            os.makedirs(os.path.join(work, sub))
        for key, text in config["data"].items():
            if key.endswith(".flags"):
                with open(os.path.join(work, "etc/granary", key), "w") as f:
                    f.write(self.paths(text))
        kubectl = os.path.join(work, "bin", "kubectl")
        with open(kubectl, "w") as f:
            f.write(f'#!/bin/sh\necho "$@" >> {work}/kubectl.log\n')
        os.chmod(kubectl, 0o755)
        self.env = dict(os.environ, PATH=f"{work}/bin:" + os.environ["PATH"])
        self.procs = {}

    def paths(self, text):
        """A pod's paths, mapped under the work directory."""
        text = text.replace("/etc/granary", f"{self.work}/etc/granary")
        text = text.replace("/var/lib/granary/cache", f"{self.work}/cache")
        text = re.sub(r"/var/lib/granary/(\w+)", lambda m: f"{self.work}/pods/$(POD_NAME)/{m.group(1)}", text)
        return re.sub(r"(?<![\w/])/data\b", f"{self.work}/data", text)

    def args(self, sts, pod, c=0):
        out = []
        for a in self.sts[sts]["spec"]["template"]["spec"]["containers"][c]["args"]:
            a = self.paths(a).replace("$(POD_NAME)", pod).replace("$(POD_NAMESPACE)", "granary")
            a = a.replace("$(CLUSTER_DOMAIN)", "cluster.local")
            a = re.sub(r"^--port=\d+$", f"--port={GRPC[pod]}", a)
            a = re.sub(r"^--metrics_port=\d+$", f"--metrics_port={HTTP[pod]}", a)
            if a.startswith("--host=") and sts != "granary-dispatcher":
                a = f"--host={self.host}"  # the pod's own DNS name, here this host's name
            if a.startswith("--dispatcher="):
                a = f"--dispatcher=127.0.0.1:{GRPC['granary-dispatcher-0']}"
            out.append(a)
        return out

    def start(self, sts, pod):
        args = self.args(sts, pod)
        for a in args:
            m = re.match(r"--(journal_dir|checkpoint_dir)=(.*)", a)
            if m:
                os.makedirs(m.group(2), exist_ok=True)
        print(f"$ granary {' '.join(args)}")
        log = open(os.path.join(self.work, "logs", f"{pod}.log"), "a")
        self.procs[pod] = subprocess.Popen([self.binary] + args, env=self.env, stdout=log,
                                           stderr=subprocess.STDOUT)

    def kill(self, pod):
        self.procs[pod].send_signal(signal.SIGKILL)
        self.procs[pod].wait()

    def status(self):
        code, body = http_get(HTTP["granary-dispatcher-0"], "/status.json")
        if code != 200:
            die(f"/status.json answered {code}: {body[:200]}")
        return json.loads(body)

    def run(self):
        d = "granary-dispatcher-0"
        self.start("granary-dispatcher", d)
        wait_ready(HTTP[d], "dispatcher")
        for w in ("granary-worker-0", "granary-worker-1"):
            self.start("granary-worker", w)
        for w in ("granary-worker-0", "granary-worker-1"):
            wait_ready(HTTP[w], w)
        for pod, port in HTTP.items():
            for path, want in (("/healthz", 200), ("/readyz", 200), ("/metrics", 200)):
                code, body = http_get(port, path)
                if code != want:
                    die(f"{pod} {path}: {code}")
            if "# TYPE" not in http_get(port, "/metrics")[1]:
                die(f"{pod} /metrics is not Prometheus text")
        code, page = http_get(HTTP[d], "/")
        if code != 200 or "<html" not in page.lower():
            die(f"dispatcher status page: {code}")
        workers = {w["worker_id"]: w for w in self.status()["state"]["workers"]}
        if sorted(workers) != ["granary-worker-0", "granary-worker-1"]:
            die(f"registered workers: {sorted(workers)}")
        for pod in HTTP:
            lines = [l for l in open(os.path.join(self.work, "logs", f"{pod}.log")) if l.startswith("{")]
            if not lines or "component" not in json.loads(lines[0]):
                die(f"{pod}: no JSON log lines (--log_format=json)")
        print(f"probes, /metrics, / and /status.json answer; JSON logs; workers registered at "
              f"{[w['address'] for w in workers.values()]}")

        spec = self.job["spec"]["template"]["spec"]
        env = dict(self.env)
        for c in spec["initContainers"]:
            for e in c.get("env", []):
                if "value" in e:
                    env[e["name"]] = self.paths(e["value"])
            args = [self.paths(a).replace("/work/", f"{self.work}/work/")
                    .replace("/usr/share/granary/examples", os.path.join(REPO, "examples"))
                    .replace("$(POD_NAME)", "granary-smoke-test-x")
                    .replace("granary-dispatcher:50051", f"127.0.0.1:{GRPC[d]}")
                    .replace("--images=2000", "--images=600") for a in c["args"]]
            print(f"$ granary {' '.join(args)}")
            r = subprocess.run([self.binary] + args, env=env, capture_output=True, text=True,
                               timeout=300)
            if r.returncode != 0:
                die(f"smoke test container {c['name']}: {r.stdout[-500:]}{r.stderr[-500:]}")
        script = spec["containers"][0]["args"][0].replace("$$", "$").replace("/work/", f"{self.work}/work/")
        r = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0:
            die("smoke test verdict")

        time.sleep(3)  # a policy period or more
        calls = open(os.path.join(self.work, "kubectl.log")).read().splitlines() \
            if os.path.exists(os.path.join(self.work, "kubectl.log")) else []
        if not any(c.startswith("scale statefulset granary-worker --replicas=") for c in calls):
            die(f"the provisioner never ran kubectl scale: {calls}")
        print(f"provisioner ran: kubectl {calls[0]} ({len(calls)} calls)")

        self.kill("granary-worker-0")
        self.start("granary-worker", "granary-worker-0")
        wait_ready(HTTP["granary-worker-0"], "granary-worker-0 after SIGKILL")
        w0 = [w for w in self.status()["state"]["workers"] if w["worker_id"] == "granary-worker-0"][0]
        if int(w0["incarnation"]) != 2:
            die(f"restarted granary-worker-0 is incarnation {w0['incarnation']}, not 2")
        print("granary-worker-0 SIGKILLed and restarted with the same args: incarnation 2")

        self.kill(d)
        self.start("granary-dispatcher", d)
        wait_ready(HTTP[d], "dispatcher after SIGKILL")
        jobs = [j.get("name") for j in self.status()["state"]["jobs"]]
        if "granary-smoke-test-x" not in jobs:
            die(f"the restarted dispatcher lost the smoke job: jobs {jobs}")
        print(f"dispatcher SIGKILLed and restarted on its journal: ready, jobs {jobs}")

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--rendered", required=True, help="validate.sh's output directory")
    parser.add_argument("--work", default="/tmp/granary-emulate")
    args = parser.parse_args()
    emulation = Emulation(args.binary, args.rendered, args.work)
    try:
        emulation.run()
    finally:
        emulation.stop()
    print("emulate_locally.py: PASS")


if __name__ == "__main__":
    main()
