"""``DependsOn`` without the duplicate a ``Fn::GetAtt`` of the role already implies."""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import CfnResource, IAnyProducer, IResolveContext, Lazy, Stack
from constructs import IConstruct


@jsii.implements(IAnyProducer)
class _DependsOnWithoutRole:
    """A resource's ``DependsOn`` minus its role.

    CDK makes a function (or a state machine) depend on its role construct: the role and its
    policies. The dependency on the role itself is already implied by the ``Role`` / ``RoleArn``
    property's ``Fn::GetAtt``, and cfn-lint reports the duplicate (W3005); the dependencies on the
    policies are kept, so the resource is not created before it may write logs, poll its queue or
    invoke its tasks.
    """

    def __init__(self, resource: CfnResource, role: CfnResource) -> None:
        self._resource = resource
        self._role_path = role.node.path

    def produce(self, context: IResolveContext) -> Any:
        stack = Stack.of(self._resource)
        depends_on = sorted(
            stack.resolve(dependency.logical_id)
            for dependency in self._resource.obtain_dependencies()
            if isinstance(dependency, CfnResource) and dependency.node.path != self._role_path
        )
        return depends_on or None


def depend_on_policies_not_role(resource: IConstruct, role: IConstruct) -> None:
    """Render ``resource``'s ``DependsOn`` without ``role`` (kept: its policies, anything else).

    Parameters
    ----------
    resource : constructs.IConstruct
        An L2 construct (``lambda_.Function``, ``sfn.StateMachine``) or its L1 resource.
    role : constructs.IConstruct
        Its ``iam.Role`` (or the role's L1 resource).
    """
    cfn_resource = resource.node.default_child or resource
    cfn_role = role.node.default_child or role
    if isinstance(cfn_resource, CfnResource) and isinstance(cfn_role, CfnResource):
        cfn_resource.add_override(
            "DependsOn", Lazy.uncached_any(_DependsOnWithoutRole(cfn_resource, cfn_role))
        )
