import json

rows = [{"id": i, "amount": i * 10} for i in range(1, 6)]
print(f"extracted {len(rows)} rows")
# The last stdout line is pushed as this task's XCom (do_xcom_push: true).
print(json.dumps(rows))
