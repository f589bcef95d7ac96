// Validate the Prometheus Operator's kinds in config/k8s (ServiceMonitor, PrometheusRule)
// against the operator's CRD schemas, as packaged by npm @kubernetes-models/prometheus-operator
// (kubernetes-validate has no schema for them). Usage, with NODE_MODULES naming the
// node_modules that holds that package and js-yaml:
//   NODE_MODULES=target/tools/crds/node_modules node scripts/validate-crds.mjs FILE...
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const modules = path.resolve(process.env.NODE_MODULES ?? "node_modules");
const load = (file) => import(pathToFileURL(path.join(modules, file)).href);
const yaml = (await load("js-yaml/index.js")).default;
const models = "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1";
const kinds = {
  ServiceMonitor: (await load(`${models}/ServiceMonitor.js`)).ServiceMonitor,
  PrometheusRule: (await load(`${models}/PrometheusRule.js`)).PrometheusRule,
};
let failed = 0;
for (const file of process.argv.slice(2)) {
  for (const doc of yaml.loadAll(fs.readFileSync(file, "utf8"))) {
    const Kind = doc && kinds[doc.kind];
    if (!Kind) continue;
    try {
      new Kind(doc).validate();
      console.log(`${file}: ${doc.kind}/${doc.metadata.name} is valid`);
    } catch (e) {
      failed += 1;
      console.error(`${file}: ${doc.kind}/${doc.metadata.name}: ${e.message}`);
    }
  }
}
process.exit(failed ? 1 : 0);
