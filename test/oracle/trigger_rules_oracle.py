"""Airflow's own trigger-rule evaluation, as an oracle for Leoflow's trigger-rule table.

Reads JSON lines {"rule": ..., "upstream": [{"state": ..., "setup": bool}, ...]} on stdin and
answers {"decision": "ready" | "wait" | "skip" | "upstream_failed"} per line: Airflow's
TriggerRuleDep (airflow/ti_deps/deps/trigger_rule_dep.py) evaluated with the scheduler's
flag_upstream_failed on a stand-in task instance whose upstreams are plain (unmapped) tasks, one
instance each. A state change to skipped or upstream_failed is the decision; otherwise ready when
every dependency status passed, wait when one did not.
"""
import json, sys
from unittest import mock
from airflow.ti_deps.deps.trigger_rule_dep import TriggerRuleDep
from airflow.utils.state import TaskInstanceState as S

FINISHED = {'success', 'failed', 'skipped', 'upstream_failed'}

def evaluate(rule, upstream):
    ups = []
    fin = []
    for i, u in enumerate(upstream):
        t = mock.Mock(task_id=f'u{i}', is_setup=bool(u.get('setup')))
        t.get_needs_expansion.return_value = False
        ups.append(t)
        if u['state'] in FINISHED:
            fin.append(mock.Mock(task_id=f'u{i}', state=S(u['state']), task=t, map_index=-1))
    task = mock.Mock(trigger_rule=rule, is_teardown=False, upstream_list=ups,
                     upstream_task_ids={u.task_id for u in ups})
    task.get_upstreams_only_setups.return_value = []
    task.get_closest_mapped_task_group.return_value = None
    ti = mock.Mock(task=task, map_index=-1)
    new = []
    ti.set_state.side_effect = lambda st, session=None: new.append(st) or True
    dc = mock.Mock(flag_upstream_failed=True, wait_for_past_depends_before_skipping=False)
    dc.ensure_finished_tis.return_value = fin
    statuses = list(TriggerRuleDep()._get_dep_statuses(ti, dc, session=mock.Mock()))
    if new:
        return {'skipped': 'skip', 'upstream_failed': 'upstream_failed'}[str(new[0].value)]
    return 'ready' if all(s.passed for s in statuses) else 'wait'

for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({'decision': evaluate(req['rule'], req['upstream'])}), flush=True)
