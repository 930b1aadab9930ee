// Never print a credential: report only whether the declared values arrived.
const conn = process.env.AIRFLOW_CONN_WAREHOUSE_DB;
const recipient = process.env.AIRFLOW_VAR_REPORT_RECIPIENT;
console.log(`warehouse_db connection delivered: ${conn ? 'yes' : 'no'}`);
console.log(`report_recipient variable delivered: ${recipient ? 'yes' : 'no'}`);
