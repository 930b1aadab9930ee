import json
import os

rows = json.loads(os.environ["LEOFLOW_XCOM_EXTRACT"])
multiplier = json.loads(os.environ.get("LEOFLOW_PARAMS", "{}")).get("multiplier", 1)
out = [{**r, "amount": r["amount"] * multiplier} for r in rows]
print(f"transformed {len(out)} rows with multiplier {multiplier}")
print(json.dumps({"total": sum(r["amount"] for r in out), "count": len(out)}))
