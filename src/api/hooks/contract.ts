// The Runtime SDK wire contract (hooks.runtime.cluster.x-k8s.io/v1alpha1):
// one TypeBox schema per request and response, from which both the
// TypeScript types and the runtime validation come. Field names, optionality
// and kinds follow CAPI's Go types (api/runtime/hooks/v1alpha1). Objects stay
// open (additionalProperties) because CAPI sends whole Cluster/Machine objects
// whose fields grow between releases; only what we read is required.
import { Type, type Static, type TSchema } from 'typebox';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN, MAX_UPGRADE_STEPS } from '../../model/cluster-upgrade.ts';
import { hookDefaults, hookNames, type FailurePolicy, type HookFamily, type HookName } from '../../model/hooks.ts';

// The hook names live below config and api both; they are part of this contract too.
export {
  defaultHandlerName,
  hookNames,
  type FailurePolicy,
  type HookFamily,
  type HookName,
} from '../../model/hooks.ts';

export const HOOKS_API_VERSION = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
export const HOOKS_PATH_PREFIX = `/${HOOKS_API_VERSION}`;

const open = { additionalProperties: true } as const;

/**
 * String and list bounds (docs/limits.md): what Kubernetes and CAPI themselves allow, so a
 * request CAPI sends always passes, while nothing longer reaches a workflow id, a Temporal
 * payload, a memo or a log line. Too long → 400 naming the field.
 */
export const LIMITS = {
  /** CAPI's own bound on a Kubernetes version (spec.topology.version, Machine spec.version). */
  version: 256,
  /** metadata.uid: a UUID (36) in practice. */
  uid: 128,
  /** A qualified label or annotation key: a DNS subdomain prefix (253), "/" and a name (63). */
  metadataKey: 317,
  labelValue: 63,
  /** Kubernetes caps all annotations of an object at 256 KiB together. */
  annotationValue: 256 * 1024,
  /** ExtensionConfig spec.settings: ours are a few dozen short keys; a version catalog is the longest value. */
  settingsCount: 128,
  settingKey: 253,
  settingValue: 64 * 1024,
  /** Upgrade steps per list: one per minor version (the gates one upgrade keeps follow from it). */
  upgradeSteps: MAX_UPGRADE_STEPS,
  /** Any other string we read (kinds, apiVersions, names of referenced objects). */
  shortString: 1024,
} as const;

/** map[string]string with bounded keys (propertyNames: a Record's key schema bounds nothing), values and count. */
const StringMap = (keyLength: number, valueLength: number, count?: number) =>
  Type.Record(Type.String(), Type.String({ maxLength: valueLength }), {
    propertyNames: { maxLength: keyLength },
    ...(count !== undefined ? { maxProperties: count } : {}),
  });
const Short = Type.String({ maxLength: LIMITS.shortString });
const Version = Type.String({ minLength: 1, maxLength: LIMITS.version });

// Kubernetes names: validated here so workflow ids built from them are unambiguous (neither holds `/`).
const ObjectMeta = Type.Object(
  {
    name: Type.String({ pattern: DNS1123_SUBDOMAIN.source }),
    namespace: Type.String({ pattern: DNS1123_LABEL.source }),
    uid: Type.Optional(Type.String({ minLength: 1, maxLength: LIMITS.uid })),
    labels: Type.Optional(StringMap(LIMITS.metadataKey, LIMITS.labelValue)),
    annotations: Type.Optional(StringMap(LIMITS.metadataKey, LIMITS.annotationValue)),
  },
  open,
);

export const ClusterSchema = Type.Object(
  {
    apiVersion: Type.Optional(Short),
    kind: Type.Optional(Short),
    metadata: ObjectMeta,
    spec: Type.Optional(
      Type.Object({ topology: Type.Optional(Type.Object({ version: Type.Optional(Version) }, open)) }, open),
    ),
  },
  open,
);
export type Cluster = Static<typeof ClusterSchema>;

const MachineSpec = Type.Object(
  {
    clusterName: Type.Optional(Short),
    version: Type.Optional(Version),
    /** The bootstrap config (KubeadmConfig) the machine uses: where an update reads its files. */
    bootstrap: Type.Optional(
      Type.Object({ configRef: Type.Optional(Type.Object({ name: Type.Optional(Short) }, open)) }, open),
    ),
  },
  open,
);
export const MachineSchema = Type.Object(
  {
    apiVersion: Type.Optional(Short),
    kind: Type.Optional(Short),
    metadata: ObjectMeta,
    spec: MachineSpec,
    /** The node, once the Machine has one: the delegate executor's agent check looks for it. */
    status: Type.Optional(
      Type.Object({ nodeRef: Type.Optional(Type.Object({ name: Type.Optional(Short) }, open)) }, open),
    ),
  },
  open,
);
export type Machine = Static<typeof MachineSchema>;

export const MachineSetSchema = Type.Object(
  {
    apiVersion: Type.Optional(Short),
    kind: Type.Optional(Short),
    metadata: ObjectMeta,
    spec: Type.Object({ clusterName: Type.Optional(Short), template: Type.Object({ spec: MachineSpec }, open) }, open),
  },
  open,
);
export type MachineSet = Static<typeof MachineSetSchema>;

/** runtime.RawExtension: any Kubernetes object (infrastructure machines, bootstrap configs, templates). */
export const RawObjectSchema = Type.Object(
  {
    apiVersion: Type.Optional(Short),
    kind: Type.Optional(Short),
    metadata: Type.Optional(Type.Object({ name: Type.Optional(Short) }, open)),
    spec: Type.Optional(Type.Unknown()),
  },
  open,
);
export type RawObject = Static<typeof RawObjectSchema>;

export const UpgradeStepSchema = Type.Object({ version: Version }, open);
export type UpgradeStep = Static<typeof UpgradeStepSchema>;
const UpgradeSteps = Type.Optional(Type.Array(UpgradeStepSchema, { maxItems: LIMITS.upgradeSteps }));

export const PatchSchema = Type.Object({
  patchType: Type.Union([Type.Literal('JSONPatch'), Type.Literal('JSONMergePatch')]),
  /** base64 of the patch document: Go's []byte in JSON. */
  patch: Type.String(),
});
export type Patch = Static<typeof PatchSchema>;

export const StatusSchema = Type.Union([Type.Literal('Success'), Type.Literal('Failure')]);
export type HookStatus = Static<typeof StatusSchema>;

// ---- hook catalog -----------------------------------------------------------

export type ResponseShape = 'plain' | 'retry';

interface HookSpec<R extends Record<string, TSchema>, S extends Record<string, TSchema>> {
  family: HookFamily;
  /** Retry hooks answer retryAfterSeconds; CAPI re-calls them while it is > 0. */
  shape: ResponseShape;
  /** Whether our answer can hold CAPI back (it decides how outages are answered). */
  blocking: boolean;
  request: R;
  response: S;
  defaultFailurePolicy: FailurePolicy;
}

function hook<R extends Record<string, TSchema>, S extends Record<string, TSchema>>(spec: HookSpec<R, S>) {
  return spec;
}

const clusterOnly = { cluster: ClusterSchema };
const upgradeWindow = {
  cluster: ClusterSchema,
  fromKubernetesVersion: Version,
  toKubernetesVersion: Version,
  controlPlaneUpgrades: UpgradeSteps,
  workersUpgrades: UpgradeSteps,
};
const upgradePoint = {
  cluster: ClusterSchema,
  kubernetesVersion: Version,
  controlPlaneUpgrades: UpgradeSteps,
  workersUpgrades: UpgradeSteps,
};
const machineObjects = Type.Object(
  { machine: MachineSchema, infrastructureMachine: RawObjectSchema, bootstrapConfig: Type.Optional(RawObjectSchema) },
  open,
);
const machineSetObjects = Type.Object(
  {
    machineSet: MachineSetSchema,
    infrastructureMachineTemplate: RawObjectSchema,
    bootstrapConfigTemplate: Type.Optional(RawObjectSchema),
  },
  open,
);
const OptionalPatch = Type.Optional(PatchSchema);

// Family and default failure policy per hook: model/hooks.ts.
export const hookCatalog = {
  BeforeClusterCreate: hook({
    ...hookDefaults.BeforeClusterCreate,
    shape: 'retry',
    blocking: true,
    request: clusterOnly,
    response: {},
  }),
  AfterControlPlaneInitialized: hook({
    ...hookDefaults.AfterControlPlaneInitialized,
    shape: 'plain',
    blocking: false,
    request: clusterOnly,
    response: {},
  }),
  BeforeClusterUpgrade: hook({
    ...hookDefaults.BeforeClusterUpgrade,
    shape: 'retry',
    blocking: true,
    request: upgradeWindow,
    response: {},
  }),
  BeforeControlPlaneUpgrade: hook({
    ...hookDefaults.BeforeControlPlaneUpgrade,
    shape: 'retry',
    blocking: true,
    request: upgradeWindow,
    response: {},
  }),
  AfterControlPlaneUpgrade: hook({
    ...hookDefaults.AfterControlPlaneUpgrade,
    shape: 'retry',
    blocking: true,
    request: upgradePoint,
    response: {},
  }),
  BeforeWorkersUpgrade: hook({
    ...hookDefaults.BeforeWorkersUpgrade,
    shape: 'retry',
    blocking: true,
    request: upgradeWindow,
    response: {},
  }),
  AfterWorkersUpgrade: hook({
    ...hookDefaults.AfterWorkersUpgrade,
    shape: 'retry',
    blocking: true,
    request: upgradePoint,
    response: {},
  }),
  AfterClusterUpgrade: hook({
    ...hookDefaults.AfterClusterUpgrade,
    shape: 'retry',
    blocking: true,
    request: { cluster: ClusterSchema, kubernetesVersion: Version },
    response: {},
  }),
  BeforeClusterDelete: hook({
    ...hookDefaults.BeforeClusterDelete,
    shape: 'retry',
    blocking: true,
    request: clusterOnly,
    response: {},
  }),
  GenerateUpgradePlan: hook({
    ...hookDefaults.GenerateUpgradePlan,
    shape: 'plain',
    blocking: false,
    request: {
      cluster: ClusterSchema,
      fromControlPlaneKubernetesVersion: Version,
      fromWorkersKubernetesVersion: Type.Optional(Version),
      toKubernetesVersion: Version,
    },
    response: { controlPlaneUpgrades: UpgradeSteps, workersUpgrades: UpgradeSteps },
  }),
  CanUpdateMachine: hook({
    ...hookDefaults.CanUpdateMachine,
    shape: 'plain',
    blocking: false,
    request: { current: machineObjects, desired: machineObjects },
    response: {
      machinePatch: OptionalPatch,
      infrastructureMachinePatch: OptionalPatch,
      bootstrapConfigPatch: OptionalPatch,
    },
  }),
  CanUpdateMachineSet: hook({
    ...hookDefaults.CanUpdateMachineSet,
    shape: 'plain',
    blocking: false,
    request: { current: machineSetObjects, desired: machineSetObjects },
    response: {
      machineSetPatch: OptionalPatch,
      infrastructureMachineTemplatePatch: OptionalPatch,
      bootstrapConfigTemplatePatch: OptionalPatch,
    },
  }),
  UpdateMachine: hook({
    ...hookDefaults.UpdateMachine,
    shape: 'retry',
    blocking: true,
    request: { desired: machineObjects },
    response: {},
  }),
} as const satisfies Record<HookName, HookSpec<Record<string, TSchema>, Record<string, TSchema>>>;

type Catalog = typeof hookCatalog;
type RetryFields<H extends HookName> = Catalog[H]['shape'] extends 'retry' ? { retryAfterSeconds: number } : object;

function requestObject<N extends HookName, R extends Record<string, TSchema>>(name: N, fields: R) {
  return Type.Object(
    {
      apiVersion: Type.Literal(HOOKS_API_VERSION),
      kind: Type.Literal(`${name}Request` as `${N}Request`),
      settings: Type.Optional(StringMap(LIMITS.settingKey, LIMITS.settingValue, LIMITS.settingsCount)),
      ...fields,
    },
    open,
  );
}

function responseObject<N extends HookName>(name: N) {
  const def = hookCatalog[name] as HookSpec<Record<string, TSchema>, Record<string, TSchema>>;
  return Type.Object(
    {
      apiVersion: Type.Literal(HOOKS_API_VERSION),
      kind: Type.Literal(`${name}Response` as `${N}Response`),
      status: StatusSchema,
      message: Type.Optional(Type.String()),
      ...(def.shape === 'retry' ? { retryAfterSeconds: Type.Integer({ minimum: 0 }) } : {}),
      ...def.response,
    },
    { additionalProperties: false },
  );
}

type RequestSchemas = { [H in HookName]: ReturnType<typeof requestObject<H, Catalog[H]['request']>> };

/** The request schema of every hook, keyed by hook name (validation and types). */
export const requestSchemas = Object.fromEntries(
  hookNames.map((h) => [h, requestObject(h, hookCatalog[h].request)]),
) as unknown as RequestSchemas;

export function requestSchema<H extends HookName>(name: H): RequestSchemas[H] {
  return requestSchemas[name];
}

/** The response schema of a hook (used by tests to check what we send). */
export function responseSchema<H extends HookName>(name: H) {
  return responseObject(name);
}

export type HookRequest<H extends HookName> = Static<RequestSchemas[H]>;

/** What a hook's own code returns; the generic layer adds apiVersion and kind. */
export type HookResult<H extends HookName> = { status: HookStatus; message?: string } & RetryFields<H> & {
    [K in keyof Catalog[H]['response']]?: Catalog[H]['response'][K] extends TSchema
      ? Static<Catalog[H]['response'][K]>
      : never;
  };

export type HookResponse<H extends HookName> = {
  apiVersion: typeof HOOKS_API_VERSION;
  kind: `${H}Response`;
} & HookResult<H>;

// ---- discovery --------------------------------------------------------------

export const ExtensionHandlerSchema = Type.Object({
  name: Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 }),
  requestHook: Type.Object({ apiVersion: Type.Literal(HOOKS_API_VERSION), hook: Type.String() }),
  timeoutSeconds: Type.Integer({ minimum: 0, maximum: 30 }),
  failurePolicy: Type.Union([Type.Literal('Fail'), Type.Literal('Ignore')]),
});
export type ExtensionHandler = Static<typeof ExtensionHandlerSchema>;

export const DiscoveryRequestSchema = Type.Object(
  { apiVersion: Type.Literal(HOOKS_API_VERSION), kind: Type.Literal('DiscoveryRequest') },
  open,
);
export const DiscoveryResponseSchema = Type.Object({
  apiVersion: Type.Literal(HOOKS_API_VERSION),
  kind: Type.Literal('DiscoveryResponse'),
  status: StatusSchema,
  message: Type.Optional(Type.String()),
  handlers: Type.Array(ExtensionHandlerSchema),
});
export type DiscoveryResponse = Static<typeof DiscoveryResponseSchema>;
