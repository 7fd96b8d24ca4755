/**
 * A realistic training-pod AdmissionReview of about 8 KB: a PyTorchJob worker as the apiserver sends it
 * (defaults applied: tolerations, service-account volume, DNS policy, enableServiceLinks, ...).
 */
export function podReview(uid = "3e2a1f60-9c1d-4a8e-9a61-7b0c2f1d5e44"): Record<string, unknown> {
  const env = [
    ["NCCL_DEBUG", "INFO"],
    ["NCCL_IB_DISABLE", "0"],
    ["NCCL_SOCKET_IFNAME", "eth0"],
    ["PYTHONUNBUFFERED", "1"],
    ["TORCH_DISTRIBUTED_DEBUG", "DETAIL"],
    ["HF_HOME", "/cache/huggingface"],
    ["WANDB_PROJECT", "llm-pretrain"],
    ["DATASET_URI", "s3://ml-datasets/pile/shards-00000-of-01024"],
    ["CHECKPOINT_DIR", "/checkpoints/llm-pretrain/run-2026-11-21"],
    ["OMP_NUM_THREADS", "8"],
  ].map(([name, value]) => ({ name, value }));
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      generateName: "llm-pretrain-worker-",
      name: "llm-pretrain-worker-3",
      namespace: "team-nlp",
      labels: {
        "training.kubeflow.org/job-name": "llm-pretrain",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "3",
        "app.kubernetes.io/part-of": "llm-pretrain",
        team: "nlp",
        "cost-center": "research-4711",
      },
      annotations: {
        "quartermaster.dev/accelerator": "A100-SXM4-80GB",
        "quartermaster.dev/interruptible": "true",
        "sidecar.istio.io/inject": "false",
        "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify({ note: "x".repeat(2700) }),
      },
      ownerReferences: [
        {
          apiVersion: "kubeflow.org/v1",
          kind: "PyTorchJob",
          name: "llm-pretrain",
          uid: "0b7c5d1e-2f3a-4b5c-8d9e-0f1a2b3c4d5e",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      restartPolicy: "OnFailure",
      terminationGracePeriodSeconds: 30,
      dnsPolicy: "ClusterFirst",
      serviceAccountName: "default",
      schedulerName: "default-scheduler",
      enableServiceLinks: true,
      preemptionPolicy: "PreemptLowerPriority",
      priority: 0,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
      initContainers: [
        {
          name: "fetch-dataset-index",
          image: "registry.example.com/ml/fetcher:1.4.2",
          command: ["/bin/fetch", "--index-only", "--dest=/cache/index"],
          resources: { requests: { cpu: "500m", memory: "512Mi" }, limits: { cpu: "1", memory: "1Gi" } },
          volumeMounts: [{ name: "cache", mountPath: "/cache" }],
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
          imagePullPolicy: "IfNotPresent",
        },
      ],
      containers: [
        {
          name: "pytorch",
          image: "registry.example.com/ml/llm-train:2026.11.3-cuda12.4",
          command: ["torchrun"],
          args: ["--nnodes=8", "--nproc-per-node=8", "/workspace/train.py", "--config=/config/pretrain-7b.yaml", "--bf16", "--grad-accum=4"],
          env,
          ports: [{ name: "pytorchjob-port", containerPort: 23456, protocol: "TCP" }],
          resources: {
            requests: { cpu: "48", memory: "480Gi", "nvidia.com/gpu": "8", "ephemeral-storage": "200Gi" },
            limits: { cpu: "64", memory: "512Gi", "nvidia.com/gpu": "8" },
          },
          volumeMounts: [
            { name: "cache", mountPath: "/cache" },
            { name: "dshm", mountPath: "/dev/shm" },
            { name: "config", mountPath: "/config", readOnly: true },
            { name: "checkpoints", mountPath: "/checkpoints" },
            { name: "kube-api-access-x7k2p", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true },
          ],
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
          imagePullPolicy: "IfNotPresent",
        },
        {
          name: "metrics-exporter",
          image: "registry.example.com/ops/dcgm-sidecar:3.3.5",
          resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "200m", memory: "256Mi" } },
          terminationMessagePath: "/dev/termination-log",
          terminationMessagePolicy: "File",
          imagePullPolicy: "IfNotPresent",
        },
      ],
      volumes: [
        { name: "cache", emptyDir: {} },
        { name: "dshm", emptyDir: { medium: "Memory", sizeLimit: "64Gi" } },
        { name: "config", configMap: { name: "llm-pretrain-config", defaultMode: 420 } },
        { name: "checkpoints", persistentVolumeClaim: { claimName: "llm-pretrain-checkpoints" } },
        {
          name: "kube-api-access-x7k2p",
          projected: {
            defaultMode: 420,
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
              { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
              { downwardAPI: { items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }] } },
            ],
          },
        },
      ],
      tolerations: [
        { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
        { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
      ],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: "topology.kubernetes.io/zone", operator: "In", values: ["us-central1-a", "us-central1-b"] }] }],
          },
        },
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 100,
              podAffinityTerm: { topologyKey: "kubernetes.io/hostname", labelSelector: { matchLabels: { "training.kubeflow.org/job-name": "llm-pretrain" } } },
            },
          ],
        },
      },
    },
    status: { phase: "Pending", qosClass: "Burstable" },
  };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      requestKind: { group: "", version: "v1", kind: "Pod" },
      requestResource: { group: "", version: "v1", resource: "pods" },
      namespace: "team-nlp",
      operation: "CREATE",
      userInfo: {
        username: "system:serviceaccount:kubeflow:training-operator",
        uid: "5d6c7b8a-1234-4cde-9abc-0fedcba98765",
        groups: ["system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"],
        extra: { "authentication.kubernetes.io/pod-name": ["training-operator-7d9f8b7c6d-x2x9k"] },
      },
      object: pod,
      oldObject: null,
      dryRun: false,
      options: { kind: "CreateOptions", apiVersion: "meta.k8s.io/v1" },
    },
  };
}
