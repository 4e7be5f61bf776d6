"""deploy/kubernetes: every rendered manifest validates against the Kubernetes schemas (kubernetes-validate), the
ServiceMonitor against the Prometheus operator's CRD (its schema, vendored) and strictly against the fields this
project uses, and the usual mistakes are caught.

The overlays are rendered by ``render`` below (resources, images, labels, patches: what the kustomizations use).
Where ``kubectl`` is installed, ``test_render_is_what_kubectl_kustomize_renders`` checks that rendering equals
``kubectl kustomize``'s, so CI machines without kubectl validate the same objects.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy/kubernetes"
VARIANTS = ["base", "overlays/gpu", "overlays/models-volume"]
KUBERNETES_VERSION = "1.32.0"

# The fields of monitoring.coreos.com/v1 ServiceMonitor this project uses, with their types (Prometheus
# operator API reference); unknown top-level spec fields are refused so that a typo is caught.
SERVICE_MONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "properties": {"matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}},
                },
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "scrapeTimeout": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                        },
                    },
                },
            },
        },
    },
}


def _crd_schema(name: str, api_version: str) -> dict[str, Any]:
    """The openAPIV3Schema of a CRD version, from the CRD files under deploy/kubernetes/crds/ (the Prometheus
    operator's own, vendored: see docs/deploy.md)."""
    crd = yaml.safe_load((KUBE / "crds" / name).read_text(encoding="utf-8"))
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def _merge(base: Any, patch: Any, key: str = "") -> Any:
    """Strategic merge as kustomize does it for the fields our patches touch: maps merge, lists of named
    objects merge by ``name`` (``mountPath`` for volume mounts), other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in ("containers", "volumes", "volumeMounts"):
        by = "mountPath" if key == "volumeMounts" else "name"
        out, added = [copy.deepcopy(item) for item in base], []
        for item in patch:
            found = next((i for i, old in enumerate(out) if old.get(by) == item.get(by)), None)
            if found is None:
                added.append(copy.deepcopy(item))
            else:
                out[found] = _merge(out[found], item, key)
        return added + out  # kustomize puts the patch's new items first
    return copy.deepcopy(patch)


def _json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    for op in ops:
        *parents, last = op["path"].strip("/").split("/")
        target = doc
        for part in parents:
            target = target[part]
        if op["op"] in ("replace", "add"):
            target[last] = op["value"]
        elif op["op"] == "remove":
            del target[last]
        else:
            raise AssertionError(f"JSON patch op {op['op']} is not rendered by this test")


def _labels(doc: dict[str, Any], labels: dict[str, str]) -> None:
    doc.setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    spec = doc.get("spec", {})
    if doc["kind"] in ("Deployment", "PodDisruptionBudget"):
        spec.setdefault("selector", {}).setdefault("matchLabels", {}).update(labels)
    if doc["kind"] == "Deployment":
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(labels)
    if doc["kind"] == "Service":
        spec.setdefault("selector", {}).update(labels)


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects a kustomization directory stands for (the subset of kustomize this project uses)."""
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    docs: list[dict[str, Any]] = []
    for resource in spec.get("resources", []):
        path = directory / resource
        docs += render(path) if path.is_dir() else list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    for entry in spec.get("labels", []):
        for doc in docs:
            _labels(doc, entry["pairs"]) if entry.get("includeSelectors") else doc["metadata"].setdefault(
                "labels", {}
            ).update(entry["pairs"])
    for image in spec.get("images", []):
        for doc in docs:
            for container in doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
                name, _, _ = container["image"].partition(":")
                if name == image["name"]:
                    container["image"] = f"{image.get('newName', name)}:{image['newTag']}"
    for patch in spec.get("patches", []):
        if "path" in patch:
            change = yaml.safe_load((directory / patch["path"]).read_text(encoding="utf-8"))
            for i, doc in enumerate(docs):
                if (doc["kind"], doc["metadata"]["name"]) == (change["kind"], change["metadata"]["name"]):
                    docs[i] = _merge(doc, change)
        else:
            target = patch["target"]
            for doc in docs:
                if (doc["kind"], doc["metadata"]["name"]) == (target["kind"], target["name"]):
                    _json_patch(doc, yaml.safe_load(patch["patch"]))
    return docs


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind]
    return doc


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_object_validates(variant: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    docs = render(KUBE / variant)
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"}
    for doc in docs:
        if doc["kind"] == "ServiceMonitor":
            jsonschema.validate(doc, SERVICE_MONITOR)  # strict: the fields this project uses, no others
            jsonschema.validate(doc, _crd_schema("monitoring.coreos.com_servicemonitors.yaml", doc["apiVersion"]))
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_usual_mistakes_are_not_made(variant: str) -> None:
    docs = render(KUBE / variant)
    deployment = by_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    name, _, tag = container["image"].partition(":")
    assert tag and tag != "latest", f"image {container['image']} needs a fixed tag"
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        assert container[probe]["httpGet"]["path"] == path
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    resources = container["resources"]
    for kind in ("cpu", "memory"):
        assert kind in resources["requests"] and kind in resources["limits"]
    # the drain fits in the grace period: preStop, then the server's SIGTERM drain (request timeout + 5 s)
    settings = by_kind(docs, "ConfigMap")["data"]
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + float(settings["MT_REQUEST_TIMEOUT_S"]) + 5
    # every setting is one the server has, with a value it accepts
    unknown = [key for key in settings if key.removeprefix("MT_").lower() not in Settings.model_fields]
    assert unknown == []
    Settings.model_validate({key.removeprefix("MT_").lower(): value for key, value in settings.items()})
    # the PDB, the Service and the ServiceMonitor select the Deployment's pods
    pods = deployment["spec"]["template"]["metadata"]["labels"]
    for selector in (
        by_kind(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        by_kind(docs, "Service")["spec"]["selector"],
        by_kind(docs, "ServiceMonitor")["spec"]["selector"]["matchLabels"],
    ):
        assert selector.items() <= pods.items()
    assert by_kind(docs, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]


def test_the_gpu_variant_asks_for_a_gpu_and_the_cuda_image() -> None:
    docs = render(KUBE / "overlays/gpu")
    [container] = by_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["image"].endswith("-gpu")
    assert by_kind(docs, "ConfigMap")["data"]["MT_PROVIDER"] == "cuda"
    assert [v["name"] for v in by_kind(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]] == ["tmp"]


def test_the_volume_variant_mounts_the_bundles_read_only() -> None:
    pod = by_kind(render(KUBE / "overlays/models-volume"), "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/app/models"]["readOnly"] is True and "/tmp" in mounts
    assert {v["name"] for v in pod["volumes"]} == {"tmp", "models"}


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (the render check needs it)")
@pytest.mark.parametrize("variant", VARIANTS)
def test_render_is_what_kubectl_kustomize_renders(variant: str) -> None:
    done = subprocess.run(
        ["kubectl", "kustomize", str(KUBE / variant)], capture_output=True, text=True, timeout=60, check=True
    )
    theirs = sorted(json.dumps(d, sort_keys=True) for d in yaml.safe_load_all(done.stdout))
    ours = sorted(json.dumps(d, sort_keys=True) for d in render(KUBE / variant))
    assert ours == theirs
