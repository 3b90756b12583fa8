"""`/calvin`: answered in the acknowledgement itself, ephemerally (only the person who typed
it sees it). Its work is a few database reads and conditional updates, well inside 3 s."""

from calvin.chat.slack.interactions import slash_command_answer


def calvin_command(ack, command, context):
    team_id = context.team_id or command.get("team_id", "")
    answer = slash_command_answer(
        team_id=team_id,
        channel_id=command.get("channel_id", ""),
        user_id=command.get("user_id", ""),
        text=command.get("text", ""),
        # The person's own team: another organisation's in a shared channel.
        user_team_id=command.get("user_team") or command.get("team_id") or team_id,
    )
    ack(response_type="ephemeral", text=answer)


def register(app) -> None:
    app.command("/calvin")(calvin_command)
