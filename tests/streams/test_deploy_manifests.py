"""deploy/agent.yaml must run the agent the way the code expects (parsed only; no cluster)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from streams import settings
from streams.log import kafka as kafka_log
from streams.log import kafka_config

ROOT = Path(__file__).resolve().parents[2]


def manifests() -> dict[str, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "agent.yaml").read_text()) if d]
    return {d["kind"]: d for d in docs}


def known_env() -> set[str]:
    names = {v for module in (settings, kafka_log) for k, v in vars(module).items() if k.startswith("ENV_")}
    names |= set(re.findall(r"`(QUOTAFLOW_KAFKA_[A-Z_]+)`", kafka_config.__doc__ or ""))
    return names


def test_deployment_runs_two_agents_from_the_configmap() -> None:
    m = manifests()
    deployment = m["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["quotaflow", "agent"]
    refs = {next(iter(r.values()))["name"] for r in container["envFrom"]}
    assert refs == {m["ConfigMap"]["metadata"]["name"], "quotaflow-kafka-credentials"}
    instance = next(e for e in container["env"] if e["name"] == "QUOTAFLOW_INSTANCE_ID")
    assert instance["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    port = int(m["ConfigMap"]["data"][settings.ENV_HTTP_PORT])
    assert container["ports"][0]["containerPort"] == port
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"


def test_every_configured_variable_is_one_the_agent_reads() -> None:
    m = manifests()
    configured = set(m["ConfigMap"]["data"])
    assert configured <= known_env(), configured - known_env()
    assert m["ConfigMap"]["data"][settings.ENV_BROKER_URL].startswith("kafka://")


def test_no_password_ships_and_the_pod_runs_unprivileged() -> None:
    text = (ROOT / "deploy" / "agent.yaml").read_text()
    m = manifests()
    assert "Secret" not in m, "the user creates the credentials Secret; none ships"
    assert "change-me" not in text and "SASL_PASSWORD:" not in text
    pod = m["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    (container,) = pod["containers"]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_a_network_policy_admits_only_the_http_port() -> None:
    m = manifests()
    policy = m["NetworkPolicy"]["spec"]
    labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"] == labels
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    (rule,) = policy["ingress"]
    assert [p["port"] for p in rule["ports"]] == [int(m["ConfigMap"]["data"][settings.ENV_HTTP_PORT])]


def test_the_sequencer_runs_alone_unprivileged_with_the_agents_settings() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all((ROOT / "deploy" / "sequencer.yaml").read_text()) if d}
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1 and deployment["strategy"] == {"type": "Recreate"}
    pod = deployment["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["quotaflow", "sequence"]
    refs = {next(iter(r.values()))["name"] for r in container["envFrom"]}
    assert refs == {manifests()["ConfigMap"]["metadata"]["name"], "quotaflow-kafka-credentials"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert docs["NetworkPolicy"]["spec"]["ingress"] == []
