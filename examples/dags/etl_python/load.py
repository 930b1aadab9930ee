import json
import os

summary = json.loads(os.environ["LEOFLOW_XCOM_TRANSFORM"])
print(f"loaded {summary['count']} rows, total amount {summary['total']}")
