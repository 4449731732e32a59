"""Check objects the way the upstream tools do, from the stored upstream files (shared/data/k8s-schemas).

* :func:`api_server_errors`: what the API server says on ``kubectl apply --validate=strict`` of a
  custom resource: the version must be served, the ``openAPIV3Schema`` must pass with unknown
  fields rejected (``x-kubernetes-preserve-unknown-fields`` excepted), every
  ``x-kubernetes-validations`` CEL rule must hold (transition rules with ``oldSelf`` skipped on a
  create), and ``metadata`` must be a valid ObjectMeta.
* :func:`volcano_admission_errors`: the HyperNode webhook (Volcano <= 1.13, ``admit_hypernode.go``)
  or the ValidatingAdmissionPolicy (>= 1.14, ``hypernodes-validating.yaml``, run with CEL).
* :func:`mig_parted_errors` / :func:`gfd_single_errors`: ``spec.go`` + ``mig_profile.go`` parsing,
  and the layout rule of ``mig-strategy.go`` for ``nvidia.com/mig.strategy=single`` nodes.

CEL runs on ``cel-python`` (``celpy``) with the few Kubernetes library functions the stored rules
use (``format.qualifiedName().validate()``, ``optional.hasValue()``, ``string.split()``).
"""

from __future__ import annotations

import copy
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes


def _find_schemas() -> Path:
    """``$CAPPLAN_K8S_SCHEMAS``, else the first ``shared/data/k8s-schemas`` next to a parent directory."""
    env = os.environ.get("CAPPLAN_K8S_SCHEMAS")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "shared" / "data" / "k8s-schemas"
        if cand.is_dir():
            return cand
    return Path("shared/data/k8s-schemas")


SCHEMAS = _find_schemas()

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_META_KEYS = {"name", "generateName", "namespace", "labels", "annotations"}


def releases(product: str) -> list[str]:
    """Stored release directories of ``kueue`` or ``volcano``, oldest first."""
    def key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.name)[:3])

    return [p.name for p in sorted((SCHEMAS / product).iterdir(), key=key)]


@cache
def crds(product: str, release: str) -> dict[str, dict[str, Any]]:
    """CRDs of one stored release by kind."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted((SCHEMAS / product / release).glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                out[doc["spec"]["names"]["kind"]] = doc
    return out


# ----------------------------------------------------------------------------- ObjectMeta
def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def metadata_errors(meta: Any, namespaced: bool) -> list[str]:
    """ObjectMeta rules the API server applies to a new object."""
    if not isinstance(meta, dict):
        return ["metadata: expected an object"]
    v = [f"metadata.{k}: unknown field" for k in meta if k not in _META_KEYS]
    name = meta.get("name")
    if not isinstance(name, str) or len(name) > 253 or not _SUBDOMAIN.match(name):
        v.append(f"metadata.name: {name!r} is not a DNS-1123 subdomain")
    if not namespaced and "namespace" in meta:
        v.append("metadata.namespace: set on a cluster-scoped object")
    for k, val in (meta.get("labels") or {}).items():
        if not _label_key_ok(k):
            v.append(f"metadata.labels: invalid key {k!r}")
        if not isinstance(val, str) or len(val) > 63 or (val and not _NAME.match(val)):
            v.append(f"metadata.labels[{k}]: invalid value {val!r}")
    return v


# ----------------------------------------------------------------------------- schema
def _strict(schema: Any) -> Any:
    """The openAPIV3Schema as a JSON schema that rejects unknown fields (kubectl --validate=strict)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if schema.get("type") == "object" and "additionalProperties" not in schema and not schema.get(
        "x-kubernetes-preserve-unknown-fields"
    ):
        out["additionalProperties"] = False
    if schema.get("nullable"):
        out.pop("nullable")
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def _version(crd: dict[str, Any], api_version: str) -> dict[str, Any] | None:
    group, _, version = api_version.partition("/")
    if group != crd["spec"]["group"]:
        return None
    return next((v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")), None)


# ----------------------------------------------------------------------------- CEL
def _qualified_name(_fmt: Any) -> celtypes.StringType:
    return celtypes.StringType("qualifiedName")


def _validate(fmt: Any, value: Any) -> celtypes.ListType:
    ok = str(fmt) == "qualifiedName" and len(str(value)) <= 63 and bool(_NAME.match(str(value)))
    return celtypes.ListType([] if ok else [celtypes.StringType("invalid")])


def _has_value(opt: Any) -> celtypes.BoolType:
    return celtypes.BoolType(len(opt) > 0)


def _split(s: Any, sep: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(x) for x in str(s).split(str(sep))])


_FUNCS = {"qualifiedName": _qualified_name, "validate": _validate, "hasValue": _has_value, "split": _split}
_ENV = celpy.Environment()


@cache
def _program(expr: str) -> Any:
    return _ENV.program(_ENV.compile(expr), functions=_FUNCS)


def cel_holds(expr: str, activation: dict[str, Any]) -> bool:
    """Evaluate a CEL expression; an evaluation error counts as a failed rule (as in the API server)."""
    try:
        result = _program(expr).evaluate(activation)
    except Exception:  # a CELEvalError, or a missing key reached by a rule
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)


def _cel_errors(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    v: list[str] = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue  # transition rule: not evaluated on a create
        if not cel_holds(rule["rule"], {"self": celpy.json_to_cel(value)}):
            v.append(f"{path or '<root>'}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for k, val in value.items():
            sub = props.get(k) or (extra if isinstance(extra, dict) else None)
            if sub is not None:
                v.extend(_cel_errors(sub, val, f"{path}.{k}" if path else k))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, val in enumerate(value):
            v.extend(_cel_errors(schema["items"], val, f"{path}[{i}]"))
    return v


def api_server_errors(obj: dict[str, Any], crd: dict[str, Any]) -> list[str]:
    """Why the API server (strict field validation) would reject ``obj`` under ``crd``; empty if accepted."""
    ver = _version(crd, str(obj.get("apiVersion", "")))
    if ver is None:
        served = [f"{crd['spec']['group']}/{v['name']}" for v in crd["spec"]["versions"] if v.get("served")]
        return [f"apiVersion {obj.get('apiVersion')!r} is not served (served: {served})"]
    if obj.get("kind") != crd["spec"]["names"]["kind"]:
        return [f"kind {obj.get('kind')!r} is not {crd['spec']['names']['kind']}"]
    schema = copy.deepcopy(ver["schema"]["openAPIV3Schema"])
    body = {k: v for k, v in obj.items() if k != "metadata"}
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in jsonschema.Draft7Validator(_strict(schema)).iter_errors(body)
    ]
    errors += metadata_errors(obj.get("metadata"), crd["spec"]["scope"] == "Namespaced")
    return errors + _cel_errors(schema, body, "")


# ----------------------------------------------------------------------------- Volcano admission
def _webhook_errors(obj: dict[str, Any]) -> list[str]:
    """``validateHyperNode`` of Volcano's webhook (v1.12, v1.13)."""
    members = (obj.get("spec") or {}).get("members") or []
    v = [] if members else ["spec.members: member must have at least one member"]
    for m in members:
        sel = m.get("selector") or {}
        kinds = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
        if len(kinds) != 1:
            v.append(f"spec.members.selector: needs exactly one selector type, got {kinds}")
            continue
        if "exactMatch" in kinds:
            name = str(sel["exactMatch"].get("name") or "")
            if not name or len(name) > 63 or not _NAME.match(name):
                v.append(f"spec.members.selector.exactMatch.name: {name!r} is not a qualified name")
        if "regexMatch" in kinds:
            pattern = str(sel["regexMatch"].get("pattern") or "")
            try:
                re.compile(pattern)
            except re.error as exc:
                v.append(f"spec.members.selector.regexMatch.pattern: {exc}")
            if not pattern:
                v.append("spec.members.selector.regexMatch.pattern: member regexMatch pattern is required")
    return v


def _policy(release: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((SCHEMAS / "volcano" / release / "hypernodes-validating.yaml").read_text())
    return next(d for d in docs if d.get("kind") == "ValidatingAdmissionPolicy")


def _vap_errors(obj: dict[str, Any], release: str) -> list[str]:
    pol = _policy(release)["spec"]
    act: dict[str, Any] = {"object": celpy.json_to_cel(obj), "format": celtypes.StringType("format")}
    variables = {}
    for var in pol.get("variables") or []:
        variables[celtypes.StringType(var["name"])] = _program(var["expression"]).evaluate(act)
    act["variables"] = celtypes.MapType(variables)
    return [f"admission: {val['message']}" for val in pol["validations"] if not cel_holds(val["expression"], act)]


def volcano_admission_errors(obj: dict[str, Any], release: str) -> list[str]:
    """Why Volcano ``release``'s admission (webhook before 1.14, policy from 1.14) would reject a HyperNode."""
    if (SCHEMAS / "volcano" / release / "hypernodes-validating.yaml").exists():
        return _vap_errors(obj, release)
    return _webhook_errors(obj)


# ----------------------------------------------------------------------------- mig-parted and GFD
_PROFILE = re.compile(r"^(\d+c\.)?\d+g\.\d+gb([+-][A-Za-z][A-Za-z0-9.]*(,[A-Za-z][A-Za-z0-9.]*)*)?$")
_ENTRY_KEYS = {"device-filter", "devices", "mig-enabled", "mig-devices"}


def mig_parted_errors(data: Any) -> list[str]:
    """Why ``nvidia-mig-parted`` would refuse to parse ``data`` (``spec.go`` and the profile grammar)."""
    if not isinstance(data, dict) or data.get("version") != "v1":
        return ["version: must be v1"]
    v = [f"{k}: unexpected field" for k in data if k not in ("version", "mig-configs")]
    configs = data.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        return [*v, "mig-configs: at least one entry is required"]
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            v.append(f"mig-configs.{name}: at least one entry is required")
            continue
        for j, e in enumerate(entries):
            p = f"mig-configs.{name}[{j}]"
            if not isinstance(e, dict):
                v.append(f"{p}: expected a mapping")
                continue
            v += [f"{p}.{k}: unexpected field" for k in e if k not in _ENTRY_KEYS]
            v += [f"{p}: missing required field {k}" for k in ("devices", "mig-enabled") if k not in e]
            dev = e.get("devices")
            if not (dev == "all" or (isinstance(dev, list) and all(type(d) is int for d in dev))):
                v.append(f"{p}.devices: must be `all` or a list of integers")
            if not isinstance(e.get("mig-enabled"), bool):
                v.append(f"{p}.mig-enabled: must be a boolean")
            devices = e.get("mig-devices")
            if e.get("mig-enabled") is True and devices is None:
                v.append(f"{p}: missing required field 'mig-devices' when 'mig-enabled' is true")
            if e.get("mig-enabled") is False and devices:
                v.append(f"{p}: MIG devices included when 'mig-enabled' is false")
            for prof, c in (devices or {}).items():
                if not _PROFILE.match(str(prof)) or ("+" in str(prof) and "-" in str(prof)):
                    v.append(f"{p}.mig-devices: invalid MIG profile {prof!r}")
                if type(c) is not int or c < 0:
                    v.append(f"{p}.mig-devices.{prof}: count must be a non-negative integer")
    return v


def per_gpu(entries: list[dict[str, Any]], gpus: int) -> list[dict[str, int] | None]:
    """What mig-parted sets on each of ``gpus`` GPUs (entries in order, the last match wins)."""
    out: list[dict[str, int] | None] = [None] * gpus
    for e in entries:
        for d in range(gpus) if e["devices"] == "all" else e["devices"]:
            out[d] = dict(e.get("mig-devices") or {}) if e["mig-enabled"] else None
    return out


def gfd_single_errors(layout: list[dict[str, int] | None]) -> list[str]:
    """Why GFD would label a ``mig.strategy=single`` node with this per-GPU layout ``-MIG-INVALID``."""
    enabled = [c for c in layout if c is not None]
    if not enabled:
        return []
    if len(enabled) != len(layout):
        return ["devices with MIG enabled and disabled detected"]
    if any(not any(c.values()) for c in enabled):
        return ["at least one MIG device is enabled but empty"]
    profiles = {p for c in enabled for p, n in c.items() if n}
    return [] if len(profiles) == 1 else ["more than one MIG device type present on node"]


# ----------------------------------------------------------------------------- core/v1 Binding
#: core/v1 ObjectReference's fields (k8s.io/api/core/v1 types.go ``ObjectReference``).
_OBJECT_REFERENCE = {"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"}


def binding_errors(obj: Any) -> list[str]:
    """The rules the API server applies to a ``v1`` ``Binding`` posted for a pod (``pods/binding``).

    The shared schemas hold no core/v1 types, so this is written from the API types and validation:
    ``Binding`` is TypeMeta, ObjectMeta and a required ``target`` (an ``ObjectReference``, strict fields);
    ``ValidatePodBinding`` refuses a target kind other than ``Node`` (or empty) and an empty target name;
    the binding REST storage binds the pod of ``metadata.name`` in ``metadata.namespace`` and, when
    ``metadata.uid`` is set, only a pod of that UID (a precondition).
    """
    if not isinstance(obj, dict):
        return ["expected an object"]
    v = [f"{k}: unknown field" for k in obj if k not in ("apiVersion", "kind", "metadata", "target")]
    if obj.get("apiVersion") != "v1" or obj.get("kind") != "Binding":
        v.append("apiVersion/kind: expected v1 Binding")
    meta = obj.get("metadata")
    # uid is an ObjectMeta field a client may set on a Binding: the REST storage's UID precondition
    v += metadata_errors({k: x for k, x in meta.items() if k != "uid"} if isinstance(meta, dict) else meta,
                         namespaced=True)
    if isinstance(meta, dict) and not meta.get("namespace"):
        v.append("metadata.namespace: the pod's namespace is required")
    target = obj.get("target")
    if not isinstance(target, dict):
        return [*v, "target: required"]
    v += [f"target.{k}: unknown field" for k in target if k not in _OBJECT_REFERENCE]
    if target.get("kind") not in (None, "", "Node"):
        v.append(f"target.kind: Unsupported value {target.get('kind')!r}: supported values: Node, <empty>")
    if not isinstance(target.get("name"), str) or not target["name"]:
        v.append("target.name: Required value")
    return v
