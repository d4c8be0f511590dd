"""What a user is in the course they launched from, by the LTI roles claim's context roles only
(LIS v2 `membership`, LTI 1.3 core A.2.3): an institution role says what the person is
elsewhere. Administrators are staff only with NORMDIVE_LTI_ADMINISTRATORS_ARE_STAFF.
"""

from __future__ import annotations

import enum

LIS_VOCABULARY = "http://purl.imsglobal.org/vocab/lis/v2/"
CONTEXT_ROLE = f"{LIS_VOCABULARY}membership#"
CONTEXT_SUB_ROLE = f"{LIS_VOCABULARY}membership/"
# With their sub-roles. A Mentor sees only the users the platform names for them: never staff.
STAFF_CONTEXT_ROLES = frozenset({"Instructor", "ContentDeveloper", "Administrator"})
LEARNER_CONTEXT_ROLE = "Learner"
# LTI 1.1's short name for a teaching assistant, still sent by some platforms in 1.3 launches.
LEGACY_SHORT_NAMES = {"TeachingAssistant": "Instructor"}
ADMINISTRATOR_ROLES = frozenset(
    {
        f"{LIS_VOCABULARY}system/person#Administrator",
        f"{LIS_VOCABULARY}system/person#SysAdmin",
        f"{LIS_VOCABULARY}institution/person#Administrator",
    }
)


class CourseRole(enum.Enum):
    STAFF = "staff"  # sees the class: the instructor view, any learner's review
    LEARNER = "learner"  # takes the lesson and is graded
    OTHER = "other"  # takes the lesson, but the course grades nobody by this launch


def context_role(role: str) -> str | None:
    """In full, as a sub-role or by its short name (LTI 1.3 allows "Instructor"); None for any
    other role, made-up ones that merely end in a role's name included."""
    if role.startswith(CONTEXT_ROLE):
        name = role.removeprefix(CONTEXT_ROLE)
    elif role.startswith(CONTEXT_SUB_ROLE):
        name, hash_sign, sub_role = role.removeprefix(CONTEXT_SUB_ROLE).partition("#")
        if not (hash_sign and sub_role.isalpha()):
            return None
    else:
        name = LEGACY_SHORT_NAMES.get(role, role)
    return name if name.isalpha() else None


def course_role(roles: tuple[str, ...], *, administrators_are_staff: bool = False) -> CourseRole:
    """Staff wins: a teacher who is also enrolled as a learner is never graded."""
    named = {context_role(role) for role in roles}
    if named & STAFF_CONTEXT_ROLES or (
        administrators_are_staff and not ADMINISTRATOR_ROLES.isdisjoint(roles)
    ):
        return CourseRole.STAFF
    if LEARNER_CONTEXT_ROLE in named:
        return CourseRole.LEARNER
    return CourseRole.OTHER


def is_staff(roles: tuple[str, ...], *, administrators_are_staff: bool = False) -> bool:
    return course_role(roles, administrators_are_staff=administrators_are_staff) is CourseRole.STAFF
