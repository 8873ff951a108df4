-- Argo CD health check of placementguard.io/PlacementMigration.
-- Install it under resource.customizations.health.placementguard.io_PlacementMigration
-- in argocd-cm (see docs/gitops.md). It maps the migration's phase and its
-- kstatus conditions (Ready, Reconciling, Stalled) to Argo CD's health:
--   Succeeded, Planned                   -> Healthy
--   Blocked, RolledBack, Failed, and Degraded (target pods Pending after
--   success; Stalled)                    -> Degraded
--   Paused                               -> Suspended
--   everything else (RollingBack included: a rollback is still at work),
--   a status that does not yet describe the current generation, or a
--   migration being deleted (its revert finalizer undoes what it
--   applied)                             -> Progressing
local hs = {}

local function condition(obj, type)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "Being deleted: placement-guard reverts what the migration applied before it goes"
  return hs
end

if obj.status == nil or obj.status.observedGeneration == nil
    or obj.metadata.generation == nil or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for placement-guard to observe the current generation"
  return hs
end

local phase = obj.status.phase or ""
local ready = condition(obj, "Ready")
local stalled = condition(obj, "Stalled")
local message = phase
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  message = phase .. ": " .. ready.message
end
hs.message = message

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  if stalled.message ~= nil and stalled.message ~= "" then
    hs.message = phase .. " (" .. (stalled.reason or "") .. "): " .. stalled.message
  end
  return hs
end
if phase == "Paused" then
  hs.status = "Suspended"
  return hs
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  return hs
end
hs.status = "Progressing"
return hs
