"""The cost model prices the stack that is deployed: its functions' memory and schedules."""

from __future__ import annotations

from costmodel.measurement import TRACE_STARTERS, Prices
from costmodel.statement import period_seconds
from functions.statement.sources import SCHEDULED as SCHEDULED_RUNS
from infra.settings import LAMBDA_MEMORY_MB as FUNCTION_MEMORY_MB
from infra.settings import SCHEDULE_MINUTES
from tests.infra.conftest import Synthesized, scheduled_targets
from tests.infra.test_stack import function, logical_id, statement_rules

RATES = {"rate(5 minutes)": 5, "rate(1 hour)": 60}


def test_the_cost_model_knows_each_functions_memory(prod: Synthesized) -> None:
    deployed = {
        name: function(prod, name.capitalize())["MemorySize"] for name in FUNCTION_MEMORY_MB
    }
    assert deployed == FUNCTION_MEMORY_MB


def test_the_cost_model_knows_each_schedule(prod: Synthesized) -> None:
    # (the statement's daily rule, Asaas's, is priced by its own model: costmodel/statement.py)
    deployed = {
        function_id: RATES[expression]
        for function_id, expression in scheduled_targets(prod)
        if expression.startswith("rate(")
    }
    assert deployed == {
        logical_id(prod, "AWS::Lambda::Function", name.capitalize()): minutes
        for name, minutes in SCHEDULE_MINUTES.items()
    }


def test_the_cost_model_knows_who_starts_a_trace(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    # Active functions other than ingest start their own traces; process continues ingest's
    starters = {
        name
        for name in FUNCTION_MEMORY_MB
        if function(prod, name.capitalize())["TracingConfig"]["Mode"] == "Active"
    }
    assert starters - {"ingest"} == set(TRACE_STARTERS)
    # ingest starts one behind the HTTP API only; the REST stage's rule is the model's rate
    assert "ingest" in starters
    assert function(dev_with_waf, "Ingest")["TracingConfig"]["Mode"] == "PassThrough"
    [rule] = dev_with_waf.resources("AWS::XRay::SamplingRule").values()
    rate = rule["Properties"]["SamplingRule"]["FixedRate"]
    assert rate == Prices.load().assumptions["xray_sampling"]


def test_the_statement_model_prices_each_provider_s_pass_at_its_rule_s_cadence(
    prod: Synthesized,
) -> None:
    # Given the statement function's rules, and the periods the statement model prices
    rules = statement_rules(prod)
    hourly = {p["provider"] for p in rules["rate(1 hour)"]}
    daily = {
        p["provider"] for e, targets in rules.items() if e.startswith("cron(") for p in targets
    }

    # Then each provider the stack schedules is priced, hourly or daily as its rule runs it
    assert set(SCHEDULED_RUNS) == hourly | daily
    assert {p: period_seconds(p) for p in SCHEDULED_RUNS} == {
        **{p: 3600 for p in hourly},
        **{p: 86_400 for p in daily},
    }
