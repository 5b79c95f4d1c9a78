// Validates Kubernetes manifests offline against the Kubernetes API's own
// OpenAPI schemas (as compiled into the kubernetes-models package): field
// types, required fields, enums, for every document of every file named.
//
//   node deploy/check/check-manifests.mjs deploy/kubernetes/netlatd.yaml
//
// Exit 0 when every document is valid, 1 with one line per problem
// otherwise, 2 on usage errors. Kinds it does not know are problems, not
// passes. The schemas accept fields they do not define (a misspelt optional
// field passes): tests/unit/test_deploy.cpp checks the fields netlatd needs
// by path.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Namespace } from "kubernetes-models/v1/Namespace";
import { ConfigMap } from "kubernetes-models/v1/ConfigMap";
import { ServiceAccount } from "kubernetes-models/v1/ServiceAccount";
import { DaemonSet } from "kubernetes-models/apps/v1/DaemonSet";

const models = {
  "v1/Namespace": Namespace,
  "v1/ConfigMap": ConfigMap,
  "v1/ServiceAccount": ServiceAccount,
  "apps/v1/DaemonSet": DaemonSet,
};

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: check-manifests.mjs FILE.yaml...");
  process.exit(2);
}

let problems = 0;
const problem = (where, text) => {
  console.log(`${where}: ${text}`);
  problems++;
};

for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"), { uniqueKeys: true });
  docs.forEach((doc, i) => {
    const where = `${file}: document ${i + 1}`;
    if (doc.errors.length > 0) {
      for (const e of doc.errors) problem(where, `YAML: ${e.message.split("\n")[0]}`);
      return;
    }
    const obj = doc.toJS();
    if (obj === null) return;  // an empty document, e.g. after a trailing ---
    const key = `${obj.apiVersion}/${obj.kind}`;
    const Model = models[key];
    const name = `${obj.kind}/${obj.metadata?.name ?? "?"}`;
    if (!Model) {
      problem(where, `${name}: apiVersion/kind '${key}' is not one this check knows`);
      return;
    }
    try {
      new Model(obj).validate();
    } catch (e) {
      for (const line of String(e.message).split(", ")) problem(`${where} (${name})`, line);
    }
  });
}
if (problems === 0) console.log(`${files.join(" ")}: valid`);
process.exit(problems === 0 ? 0 : 1);
